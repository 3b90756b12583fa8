"""create_agent, install_packages and add_mcp_server: the agent changing itself.

Each checks its arguments (every problem listed), asks approvals.policy whether a person
must approve, and either opens an approval (the call waits with the exact arguments that
will run) or applies at once. The effects, run by the worker after an approval (or in the
call when policy lets it run), apply the arguments the approval recorded (refusing a call
whose own arguments no longer match them) and check them again: the gate is host-side, and
something may have changed while the request waited.
"""

import re

from django.db import transaction
from django.utils import timezone

from approvals.policy import approval_needed
from approvals.services import approved_arguments
from calvin.chat import ChatPermanentError
from calvin.workspaces.models import Agent, Destination, Workspace, destination_name_normalise
from calvin.workspaces.services import agent_create
from secrets_vault.scanner import SecretScanner
from tools.caller import Caller
from tools.effects import effect_perform
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.approval_requests import approval_request
from tools.services.common import refuse_secrets, secret_scanner_for, strings_in, tool_call_record

NANOCLAW = ToolCall.Server.NANOCLAW

AGENT_NAME_MAX = 64
INSTRUCTIONS_MAX = 20_000
# Destination names with a meaning of their own: the session's thread, an agent's creator.
RESERVED_AGENT_NAMES = (*Destination.RESERVED, "parent")

PACKAGES_MAX = 20
PACKAGE_NAME_MAX = 214  # npm's own limit; no apt name comes near it
REASON_MAX = 2_000
# NanoClaw's patterns, matched whole (fullmatch: `$` would let a trailing newline through).
APT_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]*")
NPM_NAME = re.compile(r"(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*")

SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
RESERVED_SERVER_NAMES = ("calvin", "nanoclaw")  # Calvin's own servers, whatever the case
COMMAND_MAX = 1_000
ARGS_MAX = 50
ARG_MAX = 2_000
ENV_MAX = 50
ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_KEY_MAX = 128
ENV_VALUE_MAX = 2_000
VAULT_PREFIX = "vault:"
VAULT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# Seed 002's placeholder for a credential: the vault secret named like the variable.
MANAGED_PLACEHOLDER = "onecli-managed"
# An approval card shows every argument in full: these keep it within Slack's 50 blocks.
ARGS_TOTAL_MAX = 10_000
ENV_TOTAL_MAX = 10_000


class EffectRefused(ChatPermanentError):
    """An approved change that can no longer apply; the text reaches the agent and the card."""


def shown(value: str, limit: int = 80) -> str:
    """A value in a refusal: quoted, escapes visible (a newline, a look-alike letter)."""
    text = ascii(value)
    return text if len(text) <= limit else text[: limit - 1] + "…'"


def _refuse_if(problems: list[str], what: str) -> None:
    if problems:
        raise ToolRefused(f"{what}: " + "; ".join(problems))


def _caller_agent(caller: Caller) -> Agent:
    agent = Agent.objects.filter(id=caller.agent_id).first() if caller.agent_id is not None else None
    if agent is None:
        raise ToolRefused("this session has no agent to change")
    return agent


def _submit(*, caller: Caller, agent: Agent, tool: str, arguments: dict, summary: str, secrets: SecretScanner) -> dict:
    """Open an approval where policy asks for one; otherwise apply now, in this transaction."""
    payload = {"agent_id": agent.id}
    if approval_needed(source=NANOCLAW, tool=tool, cli_scope=agent.cli_scope):
        approval = approval_request(
            caller=caller, tool=tool, arguments=arguments, summary=summary, secrets=secrets, payload=payload
        )
        return {"status": "approval-pending", "approval_id": approval.id}
    call = tool_call_record(
        caller=caller,
        tool=tool,
        arguments=arguments,
        payload=payload,
        secrets=secrets,
        server=NANOCLAW,
        status=ToolCall.Status.APPLYING,  # publishes nothing: applied right here
    )
    try:
        platform_ids = effect_perform(call)  # the one registry the worker uses too
    except EffectRefused as exc:
        raise ToolRefused(f"{tool} refused: {exc}") from None
    ToolCall.objects.filter(id=call.id).update(
        status=ToolCall.Status.APPLIED, platform_ids=platform_ids, finished_at=timezone.now()
    )
    return {"status": "applied"}


def _record_outcome(call: ToolCall, text: str) -> None:
    """What the agent is told once the change applied (approvals.services reads it)."""
    ToolCall.objects.filter(id=call.id).update(result={"outcome": text})


# create_agent


def agent_name_problems(*, workspace_id: int, creator: Agent, name: str) -> list[str]:
    """`name` is already normalised. Unique in the workspace, and not a destination the creator has."""
    if not name:
        return ["name needs at least one letter or digit (a-z, 0-9)"]
    if len(name) > AGENT_NAME_MAX:
        return [f"name is {len(name)} characters after normalising; at most {AGENT_NAME_MAX}"]
    if name in RESERVED_AGENT_NAMES:
        return [f"{name!r} is reserved ({', '.join(RESERVED_AGENT_NAMES)})"]
    problems = []
    existing = Agent.objects.filter(workspace_id=workspace_id).values_list("name", flat=True)
    if any(destination_name_normalise(other) == name for other in existing):
        problems.append(f"an agent named {name!r} already exists in this workspace")
    if Destination.objects.filter(agent=creator, name=name).exists():
        problems.append(f"{name!r} is already one of your destinations")
    return problems


@transaction.atomic
def agent_create_request(*, caller: Caller, name: str, instructions: str | None = None) -> dict:
    creator = _caller_agent(caller)
    normalised = destination_name_normalise(name)
    problems = agent_name_problems(workspace_id=caller.workspace_id, creator=creator, name=normalised)
    if instructions is not None and len(instructions) > INSTRUCTIONS_MAX:
        problems.append(f"instructions are {len(instructions):,} characters; at most {INSTRUCTIONS_MAX:,}")
    _refuse_if(problems, "create_agent refused")
    scanner = secret_scanner_for(caller)
    refuse_secrets(what="the name or instructions", secrets=scanner, content=f"{name}\n{instructions or ''}")
    arguments = {"name": normalised, "instructions": instructions or ""}
    result = _submit(
        caller=caller,
        agent=creator,
        tool="create_agent",
        arguments=arguments,
        summary=f"create agent {normalised!r}",
        secrets=scanner,
    )
    if result["status"] == "applied":
        return {"status": "created", "agent": normalised, "destination": normalised}
    return result


def create_agent_effect(call: ToolCall) -> dict:
    creator = Agent.objects.select_related("workspace").get(id=call.payload["agent_id"])
    Workspace.objects.select_for_update().filter(id=creator.workspace_id).first()  # one name check at a time
    arguments = approved_arguments(call)
    name, instructions = arguments["name"], arguments["instructions"]
    problems = agent_name_problems(workspace_id=creator.workspace_id, creator=creator, name=name)
    if problems:
        raise EffectRefused("; ".join(problems))
    child = agent_create(workspace=creator.workspace, name=name, instructions=instructions, created_by=creator)
    # Both destination maps: the creator reaches it by its name, it reaches its creator as "parent".
    Destination.objects.create(agent=creator, name=name, target_agent=child)
    Destination.objects.create(agent=child, name="parent", target_agent=creator)
    _record_outcome(call, f"Agent {name!r} exists: send_message to {name!r} reaches it; it reaches you as 'parent'.")
    return {"agent_id": child.id}


# install_packages


def package_problems(apt: list[str], npm: list[str]) -> list[str]:
    total = len(apt) + len(npm)
    if total == 0:
        return ["name at least one apt or npm package"]
    if total > PACKAGES_MAX:
        return [f"at most {PACKAGES_MAX} packages per request (got {total})"]
    bad = [
        f"{kind} {shown(name)}"
        for kind, names, pattern in (("apt", apt, APT_NAME), ("npm", npm, NPM_NAME))
        for name in names
        if len(name) > PACKAGE_NAME_MAX or not pattern.fullmatch(name)
    ]
    if bad:
        return [
            "invalid package names (a bare name: no version, flag, space or shell character; apt names match "
            "^[a-z0-9][a-z0-9._+-]*$, npm names ^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$, "
            f"at most {PACKAGE_NAME_MAX} characters): " + ", ".join(bad)
        ]
    return []


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


@transaction.atomic
def packages_install_request(
    *, caller: Caller, apt: list[str] | None = None, npm: list[str] | None = None, reason: str | None = None
) -> dict:
    agent = _caller_agent(caller)
    apt, npm = apt or [], npm or []
    problems = package_problems(apt, npm)
    if reason is not None and len(reason) > REASON_MAX:
        problems.append(f"reason is {len(reason):,} characters; at most {REASON_MAX:,}")
    _refuse_if(problems, "install_packages refused")
    arguments = {"apt": _unique(apt), "npm": _unique(npm), "reason": reason or ""}
    scanner = secret_scanner_for(caller)
    parts = [f"{kind}: {', '.join(arguments[kind])}" for kind in ("apt", "npm") if arguments[kind]]
    return _submit(
        caller=caller,
        agent=agent,
        tool="install_packages",
        arguments=arguments,
        summary="install " + "; ".join(parts),
        secrets=scanner,
    )


def install_packages_effect(call: ToolCall) -> dict:
    arguments = approved_arguments(call)
    apt, npm = arguments["apt"], arguments["npm"]
    problems = package_problems(apt, npm)  # again, on the host: never trust the stored row alone
    if problems:
        raise EffectRefused("; ".join(problems))
    agent = Agent.objects.select_for_update().get(id=call.payload["agent_id"])
    new_apt = [p for p in apt if p not in agent.apt_packages]
    new_npm = [p for p in npm if p not in agent.npm_packages]
    if new_apt or new_npm:
        agent.apt_packages = [*agent.apt_packages, *new_apt]
        agent.npm_packages = [*agent.npm_packages, *new_npm]
        agent.environment_version += 1
        agent.save(update_fields=["apt_packages", "npm_packages", "environment_version"])
        added = "; ".join(f"{k}: {', '.join(v)}" for k, v in (("apt", new_apt), ("npm", new_npm)) if v)
        outcome = (
            f"Added {added}. Your environment is rebuilt (version {agent.environment_version}) "
            "before your next turn, in every session of yours; the packages stay for every later session."
        )
    else:
        outcome = "All of them were already in your environment; nothing changed."
    _record_outcome(call, outcome)
    return {"agent_id": agent.id, "environment_version": agent.environment_version}


# add_mcp_server


def _server_name_problems(agent: Agent, name: str) -> list[str]:
    if not SERVER_NAME.fullmatch(name):
        return [
            f"name {shown(name)} must be one label: 1 to 63 letters, digits, '-' or '_', "
            "starting with a letter or digit"
        ]
    if name.lower() in RESERVED_SERVER_NAMES:
        return [f"name {name!r} is reserved for Calvin's own servers ({', '.join(RESERVED_SERVER_NAMES)})"]
    if any(existing.lower() == name.lower() for existing in agent.mcp_servers or {}):
        return [f"you already have an MCP server named {name!r}"]
    return []


def _env_problems(env: dict[str, str]) -> list[str]:
    problems = []
    if len(env) > ENV_MAX:
        problems.append(f"env: at most {ENV_MAX} variables (got {len(env)})")
    bad_keys = [shown(k) for k in env if len(k) > ENV_KEY_MAX or not ENV_KEY.fullmatch(k)]
    if bad_keys:
        problems.append(
            "env: variable names must match ^[A-Za-z_][A-Za-z0-9_]*$ "
            f"(at most {ENV_KEY_MAX} characters): " + ", ".join(bad_keys)
        )
    long_values = [k for k, v in env.items() if len(v) > ENV_VALUE_MAX]
    if long_values:
        problems.append(f"env: a value is at most {ENV_VALUE_MAX:,} characters: " + ", ".join(map(shown, long_values)))
    if sum(len(k) + len(v) for k, v in env.items()) > ENV_TOTAL_MAX:
        problems.append(f"env: at most {ENV_TOTAL_MAX:,} characters in all")
    refs = [
        k for k, v in env.items() if v.startswith(VAULT_PREFIX) and not VAULT_NAME.fullmatch(v[len(VAULT_PREFIX) :])
    ]
    if refs:
        problems.append(
            "env: a vault reference is vault:NAME, NAME a secret's name "
            "(letters, digits, '_', '.', '-'): " + ", ".join(map(shown, refs))
        )
    return problems


def env_with_references(env: dict[str, str]) -> dict[str, str]:
    """`GITHUB_TOKEN: "onecli-managed"` means `GITHUB_TOKEN: "vault:GITHUB_TOKEN"`; the card shows the reference."""
    return {key: VAULT_PREFIX + key if value == MANAGED_PLACEHOLDER else value for key, value in env.items()}


def mcp_server_problems(*, agent: Agent, name: str, command: str, args: list[str], env: dict[str, str]) -> list[str]:
    problems = _server_name_problems(agent, name)
    if not command.strip():
        problems.append("command must not be empty")
    elif len(command) > COMMAND_MAX:
        problems.append(f"command is at most {COMMAND_MAX:,} characters")
    elif any(not c.isprintable() for c in command):
        problems.append(f"command {shown(command)} contains a control or invisible character")
    if len(args) > ARGS_MAX:
        problems.append(f"args: at most {ARGS_MAX} arguments (got {len(args)})")
    long_args = [str(i) for i, a in enumerate(args) if len(a) > ARG_MAX]
    if long_args:
        problems.append(f"args: an argument is at most {ARG_MAX:,} characters: args[{'], args['.join(long_args)}]")
    if sum(len(a) for a in args) > ARGS_TOTAL_MAX:
        problems.append(f"args: at most {ARGS_TOTAL_MAX:,} characters in all")
    # Claude Code expands ${VAR} in these from the session's environment, which holds its
    # secrets: the card would show a name while a secret's value ran.
    plain = [("command", command), *((f"args[{i}]", a) for i, a in enumerate(args))]
    plain += [(f"env {k}", v) for k, v in env.items() if not v.startswith(VAULT_PREFIX)]
    expanding = [where for where, text in plain if "${" in text]
    if expanding:
        problems.append("'${' is not allowed (name a secret as vault:NAME instead): " + ", ".join(expanding))
    return problems + _env_problems(env)


@transaction.atomic
def mcp_server_add_request(
    *, caller: Caller, name: str, command: str, args: list[str] | None = None, env: dict[str, str] | None = None
) -> dict:
    agent = _caller_agent(caller)
    args, env = args or [], env_with_references(env or {})
    _refuse_if(
        mcp_server_problems(agent=agent, name=name, command=command, args=args, env=env), "add_mcp_server refused"
    )
    scanner = secret_scanner_for(caller)
    # Credentials are never typed into chat: a secret's value is refused, a vault:NAME reference is not.
    refuse_secrets(
        what="the command, an argument or an env value",
        secrets=scanner,
        content="\n".join(strings_in([name, command, args, env])),
    )
    arguments = {"name": name, "command": command, "args": args, "env": env}
    return _submit(
        caller=caller,
        agent=agent,
        tool="add_mcp_server",
        arguments=arguments,
        summary=f"add MCP server {name!r}: {command} {' '.join(args)}".strip(),
        secrets=scanner,
    )


def add_mcp_server_effect(call: ToolCall) -> dict:
    agent = Agent.objects.select_for_update().get(id=call.payload["agent_id"])
    spec = approved_arguments(call)
    problems = mcp_server_problems(
        agent=agent, name=spec["name"], command=spec["command"], args=spec["args"], env=spec["env"]
    )
    if problems:
        raise EffectRefused("; ".join(problems))
    agent.mcp_servers = {
        **(agent.mcp_servers or {}),
        spec["name"]: {"command": spec["command"], "args": spec["args"], "env": spec["env"]},
    }
    agent.save(update_fields=["mcp_servers"])
    _record_outcome(
        call,
        f"MCP server {spec['name']!r} is in your config; your next turn, in every session of yours, has its tools.",
    )
    return {"agent_id": agent.id}
