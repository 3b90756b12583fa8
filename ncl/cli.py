"""`ncl <resource> <verb> [--flags]`: parse, call the API once (or page through it), show, exit.

Exit codes (see ncl/__init__.py): 0 ok, 2 usage, 3 approval-pending, 4 not found, 5 refused,
6 cannot reach the gateway, 1 the gateway failed.
"""

import argparse
import os
import sys

from ncl import APPROVAL_PENDING, OK, USAGE, output
from ncl.client import Gateway, NclError, api_base
from ncl.commands import CATALOG, Resource, Verb

MAX_ID = 2**63 - 1
MAX_ITEMS = 10_000  # --all stops here: a runaway listing is a mistake, not a want
INTRO = """ncl: Calvin's admin CLI, for agents (in their sandbox, as themselves) and people (with an API token).

usage: ncl <resource> <verb> [arguments] [--json] [--url URL]
       ncl me                 who this token is, and what it may see
       ncl help [resource]    this, or one resource's verbs

The gateway is CALVIN_URL (or --url) and the token CALVIN_TOKEN; a runner sets both.
Exit codes: 0 ok, 2 usage, 3 approval-pending, 4 not found, 5 refused, 6 cannot reach the gateway."""


def identifier(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an id: {text[:40]!r} (a positive whole number)") from None
    if not 1 <= value <= MAX_ID:
        raise argparse.ArgumentTypeError(f"not an id: {value} (a positive whole number)")
    return value


def _flag_type(flag):
    if not flag.integer:
        return str
    return identifier if flag.name == "agent" else int  # the API bounds the others


def resource_help(resource: Resource) -> str:
    names = ", ".join((resource.name, *resource.aliases))
    lines = [f"ncl {resource.name}: {resource.summary}", "", f"usage: ncl {resource.name} <verb> [arguments]", ""]
    width = max(len(verb.name) for verb in resource.verbs)
    for verb in resource.verbs:
        arguments = " ".join(f"<{name.removesuffix('_id')}>" for name in verb.arguments)
        flags = " ".join(
            f"--{f.name} X" if f.name in verb.required else f"[--{f.name} X]" for f in (*verb.flags, *verb.body)
        )
        paging = "[--limit N] [--cursor C | --all]" if verb.paged else ""
        people = " (people only)" if verb.people_only else ""
        lines.append(f"  {verb.name.ljust(width)}  {verb.summary}{people}")
        usage = " ".join(part for part in (arguments, flags, paging) if part)
        if usage:
            lines.append(f"  {' ' * width}    ncl {resource.name} {verb.name} {usage}")
    if resource.notes:
        lines += ["", resource.notes]
    if resource.aliases:
        lines += ["", f"Also: {names}."]
    return "\n".join(lines)


def full_help() -> str:
    width = max(len(resource.name) for resource in CATALOG.resources)
    lines = [INTRO, "", "resources:"]
    for resource in CATALOG.resources:
        verbs = " | ".join(verb.name for verb in resource.verbs)
        lines.append(f"  {resource.name.ljust(width)}  {verbs}")
    lines += ["", "`ncl <resource> help` shows a resource's verbs and flags."]
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # argparse's own usage lines are long and generic: say what was wrong and where help is.
        words = self.prog.split()
        where = f"ncl {words[1]} help" if len(words) > 1 else "ncl help"
        raise NclError(f"{message} (see `{where}`)", USAGE)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine output")
    common.add_argument("--url", default=argparse.SUPPRESS, help="the gateway (default: CALVIN_URL)")
    common.add_argument("--timeout", type=float, default=argparse.SUPPRESS, help="seconds per request (default 30)")
    return common


def parser() -> argparse.ArgumentParser:
    common = _common()
    root = _Parser(prog="ncl", add_help=False, parents=[common])
    commands = root.add_subparsers(dest="resource", parser_class=_Parser)
    shown = commands.add_parser("help", add_help=False, parents=[common])
    shown.add_argument("topic", nargs="?")
    commands.add_parser("me", add_help=False, parents=[common], aliases=["whoami"])
    for resource in CATALOG.resources:
        sub = commands.add_parser(resource.name, aliases=list(resource.aliases), add_help=False, parents=[common])
        sub.set_defaults(resource=resource.name)
        verbs = sub.add_subparsers(dest="verb_name", parser_class=_Parser)
        verbs.add_parser("help", add_help=False)
        for verb in resource.verbs:
            leaf = verbs.add_parser(
                verb.name, prog=f"ncl {resource.name} {verb.name}", add_help=False, parents=[common]
            )
            for name in verb.arguments:
                leaf.add_argument(name, type=identifier, metavar=name.removesuffix("_id"))
            for flag in verb.flags:
                leaf.add_argument(f"--{flag.name}", dest=f"query_{flag.name}", type=identifier if flag.integer else str)
            for flag in verb.body:
                leaf.add_argument(f"--{flag.name}", dest=f"body_{flag.key}", type=_flag_type(flag))
            if verb.paged:
                leaf.add_argument("--limit", type=int)
                leaf.add_argument("--cursor")
                leaf.add_argument("--all", action="store_true", help="every page")
    return root


def main(argv: list[str] | None = None, environ=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    try:
        args = parser().parse_args(argv)
        return _dispatch(args, environ)
    except NclError as error:
        if getattr(error, "body", None) and "--json" in argv:
            print(output.as_json(error.body))
        print(f"ncl: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130


def _dispatch(args, environ) -> int:
    if args.resource is None:
        print(full_help(), file=sys.stderr)
        return USAGE
    if args.resource == "help":
        resource = CATALOG.find(args.topic) if args.topic else None
        if args.topic and resource is None:
            raise NclError(f"no resource {args.topic!r}: ncl help lists them", USAGE)
        print(resource_help(resource) if resource else full_help())
        return OK
    resource = CATALOG.find(args.resource)
    if resource is not None and args.verb_name in (None, "help"):
        print(resource_help(resource), file=sys.stdout if args.verb_name else sys.stderr)
        return OK if args.verb_name else USAGE
    gateway = _gateway(args, environ)
    if resource is None:  # me / whoami
        _, body = gateway.get("/me")
        print(output.as_json(body) if _json(args) else output.record(body))
        return OK
    return _run(resource.verb(args.verb_name), args, gateway)


def _json(args) -> bool:
    return getattr(args, "json", False)


def _gateway(args, environ) -> Gateway:
    url = getattr(args, "url", None) or environ.get("CALVIN_URL", "")
    token = environ.get("CALVIN_TOKEN", "").strip()
    if not url:
        raise NclError("no gateway: set CALVIN_URL or pass --url (an agent's runner sets it)", USAGE)
    if not token:
        raise NclError("no token: set CALVIN_TOKEN to an API token (the dashboard's Tokens page)", USAGE)
    timeout = getattr(args, "timeout", 30.0)
    if not 0 < timeout <= 600:
        raise NclError("--timeout: between 0 and 600 seconds", USAGE)
    return Gateway(api_base(url), token, timeout=timeout)


def _path(verb: Verb, args, gateway: Gateway) -> str:
    values = {name: getattr(args, name) for name in verb.arguments}
    if "{agent}" in verb.path:
        values["agent"] = args.query_agent or _own_agent(gateway)
    return verb.path.format(**values)


def _own_agent(gateway: Gateway) -> int:
    _, me = gateway.get("/me")
    if not me.get("agent_id"):
        raise NclError("--agent: which agent's (a person has no agent of their own; `ncl agents list`)", USAGE)
    return me["agent_id"]


def _run(verb: Verb, args, gateway: Gateway) -> int:
    path = _path(verb, args, gateway)
    if verb.method != "GET":
        status, body = gateway.write(verb.method, path, _body(verb, args) if verb.body else None)
        if _json(args):
            print(output.as_json(body))
        elif status == 202:
            print(
                f"approval-pending: approval {body.get('approval')} waits for a person "
                f"(`ncl approvals get {body.get('approval')}`). {output.printable(body.get('detail', ''))}"
            )
        else:
            print(f"{output.printable(body.get('status', 'done'))}: {output.printable(body.get('detail', ''))}")
        return APPROVAL_PENDING if status == 202 else OK
    params = {
        flag.name: getattr(args, f"query_{flag.name}")
        for flag in verb.flags
        if flag.name != "agent" or "{agent}" not in verb.path
    }
    if not verb.paged:
        _, body = gateway.get(path, params)
        if _json(args):
            print(output.as_json(body))
        elif verb.items_key:
            print(output.table(body.get(verb.items_key) or [], verb.columns))
        else:
            print(output.record(body))
        return OK
    params |= {"limit": args.limit, "cursor": args.cursor}
    items, next_cursor = _pages(gateway, path, params, every=args.all)
    if _json(args):
        print(output.as_json({"items": items, "next_cursor": next_cursor}))
    else:
        print(output.table(items, verb.columns))
        if next_cursor:
            print(f"(more: --cursor {next_cursor}, or --all)", file=sys.stderr)
    return OK


def _body(verb: Verb, args) -> dict:
    body = {}
    for flag in verb.body:
        value = getattr(args, f"body_{flag.key}")
        if value is None:
            continue
        if flag.file:
            try:
                with open(value, encoding="utf-8") as given:
                    value = given.read(1024 * 1024)
            except (OSError, UnicodeDecodeError) as exc:
                raise NclError(f"--{flag.name}: cannot read {value!r}: {exc}", USAGE) from None
        body[flag.key] = value
    missing = [f"--{name}" for name in verb.required if name.replace("-", "_") not in body]
    if missing:
        raise NclError(f"{' and '.join(missing)} required (see `ncl {verb.path.split('/')[1]} help`)", USAGE)
    return body


def _pages(gateway: Gateway, path: str, params: dict, *, every: bool) -> tuple[list[dict], str | None]:
    items: list[dict] = []
    while True:
        _, body = gateway.get(path, params)
        items += body.get("items") or []
        next_cursor = body.get("next_cursor")
        if not every or not next_cursor:
            return items, next_cursor
        if len(items) >= MAX_ITEMS:
            print(f"ncl: stopped after {len(items)} items", file=sys.stderr)
            return items, next_cursor
        params = {**params, "cursor": next_cursor}
