"""The dependency arrows run one way. This test is where the layering is written down.

Layers, from the top (a module may import its own package and any layer below its own):

    shell          calvin.dashboard, calvin.accounts, calvin.api, calvin.previews, calvin.admin_*,
                   calvin.urls / routing / asgi / http_server / health; every app's admin
                   modules (admin.py, admin_*.py), management commands and websocket consumers;
                   Slack's ways in (calvin.chat.slack listeners, interactions, views, urls).
                   They may import everything; nothing below imports them.
    tools          the MCP servers, tool services, effects, retries.
    calvin.schedules  scheduled tasks: cron, claims of slots, runs as turns of the task's session.
    calvin.chat    the channel adapters behind the chat port (calvin.chat.web, calvin.chat.slack):
                   they read tools' models (the outbox rows they deliver), never tools' services.
    approvals      policy, PendingApproval, decisions, cards' rendering (it redacts through the vault).
    secrets_vault  the vault, secret requests, redaction.
    sessions       threads, sessions, turns, hosts, runners, messages.
    workspaces     tenancy: workspaces, members, agents, quotas.

Leaves anyone may import, which themselves import only leaves and models: calvin.events,
calvin.audit, calvin.celery (the app, not its tasks), calvin.operators, calvin.private_files,
calvin.presses (a card press's refusal), calvin.channel_push (a send to a Channels group),
the chat port (calvin.chat: `chat_adapter_for`, the adapter interface and its errors in
calvin.chat.base, links, thread refs; the adapter itself is named by
settings.CALVIN_CHAT_ADAPTERS and loaded at run time), and pure functions: tools.card_spec
(card layout, Block Kit, card text), tools.services.paths, tools.availability,
calvin.chat.people_words, calvin.chat.mrkdwn. Any app's `models` module may be imported from
any layer below the shell: the schema is one graph (a Message points at its ToolCall, a
PendingApproval at the call it gates), and a model is data, not behaviour. No app imports
another app's `tasks`, downward either.

Where a lower layer needs an upper one to act, it announces an event (calvin/events.py) and
the upper app subscribes from its AppConfig.ready(): calvin/dashboard/live.py (pages),
calvin/chat/reactions.py (the Slack outbox, recorded in the same transaction),
approvals/reactions.py (cards), tools/reactions.py (an approved call's effect, per-runner
counters, a secret request's card), sessions/reactions.py (a resumed agent's notices, AGENTS.md
pushes). Where it needs an answer back, the upper app fills a port from ready():
sessions/secrets_port.py (the vault redacts what the agent says, gives a turn its secrets),
secrets_vault.services.RESEALERS (chat re-seals Slack tokens when the vault rotates).

The walk reads every import, those inside functions included (a deferred import dodges an
import cycle at load time, not the dependency), and `import_string("...")` literals.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Checked packages, lowest first; the rank is the index.
LAYERS = ["calvin.workspaces", "sessions", "secrets_vault", "approvals", "calvin.schedules", "calvin.chat", "tools"]
LEAVES = (
    "calvin.events",
    "calvin.audit",
    "calvin.celery",
    "calvin.operators",
    "calvin.private_files",
    "calvin.settings",
    "calvin.presses",
    "calvin.channel_push",
    "tools.card_spec",  # cards' layout, Block Kit and text: pure functions
    "tools.services.paths",  # the race-free path walk the gateway and the host daemon share
    "tools.availability",  # the seed's table of tools per deployment mode
    "calvin.chat.people_words",  # text in people's words: pure functions
    "calvin.chat.mrkdwn",
    "calvin.sockets",  # what every websocket consumer shares
    "calvin.previews.addresses",  # where previews live and which Host names one: pure functions
)
# The chat port: the adapter interface, its errors, and how a thread names its adapter
# (settings.CALVIN_CHAT_ADAPTERS, resolved at run time). Every layer may post through it; the
# adapters behind it (calvin.chat.web, calvin.chat.slack) are a layer of their own.
CHAT_PORT = ("calvin.chat", "calvin.chat.base", "calvin.chat.links", "calvin.chat.thread_refs")
SHELL = (
    "calvin.dashboard",
    "calvin.accounts",
    "calvin.api",
    "calvin.previews",
    "calvin.admin_",
    "calvin.urls",
    "calvin.routing",
    "calvin.asgi",
    "calvin.http_server",
    "calvin.health",
    # Slack's ways in (like views): its listeners and interactivity handlers.
    "calvin.chat.slack.bolt_app",
    "calvin.chat.slack.listeners",
    "calvin.chat.slack.interactions",
    "calvin.chat.slack.interaction_tasks",
    "calvin.chat.slack.views",
    "calvin.chat.slack.urls",
    "calvin.chat.tasks",  # gathers chat's tasks for Celery's autodiscovery
)
# Data, readable from every layer below the shell.
SHARED_MODELS = (*(f"{package}.models" for package in LAYERS), "calvin.previews.models")
# What the chat adapter may read of the layer above it: the outbox rows it delivers.
CHAT_READS = ("tools.models",)


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") or (p.endswith("_") and name.startswith(p)) for p in prefixes)


def _is_shell_module(name: str) -> bool:
    parts = name.split(".")
    return (
        _within(name, SHELL)
        or "management" in parts
        or "migrations" in parts
        or "consumers" in parts
        or any(part == "admin" or part.startswith("admin_") for part in parts[1:])
    )


def layer_of(name: str) -> int | None:
    """The rank of a module's layer; None for Django and libraries (not checked); -1 for leaves."""
    if is_leaf(name):
        return -1
    for rank in reversed(range(len(LAYERS))):  # calvin.chat before calvin
        if _within(name, (LAYERS[rank],)):
            return rank
    return None


def modules():
    """Every checked module once: the layers' and the leaves' (shell modules inside them excepted)."""
    found = {}
    for root in [*LAYERS, *LEAVES, *CHAT_PORT]:
        base = ROOT / root.replace(".", "/")
        paths = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
        for path in paths:
            if not path.exists():
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            if not _is_shell_module(name):
                found[name] = path
    return sorted(found.items())


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported(path: Path, module: str):
    """(line, imported module) for every import in the file, at any depth."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield node.lineno, base
            for alias in node.names:  # `from calvin.chat.slack import outbox` names a module too
                if _is_module(f"{base}.{alias.name}"):
                    yield node.lineno, f"{base}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "import_string"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value.rpartition(".")[0]


def is_leaf(name: str) -> bool:
    return _within(name, LEAVES) or name in CHAT_PORT


def problem(module: str, target: str) -> str | None:
    source = layer_of(module)
    if is_leaf(target):
        return None
    if _is_shell_module(target) and _within(target, SHELL) and not _within(target, SHARED_MODELS):
        return f"imports the shell ({target})"
    rank = layer_of(target)
    if rank is not None and rank >= 0 and rank != source and "tasks" in target.split(".")[1:]:
        return f"imports another app's tasks ({target}): announce an event, and let that app react"
    if rank is None or (rank == source and source >= 0) or rank < source:
        return None
    if source < 0 and _within(target, SHARED_MODELS):
        return None  # a leaf reads models (the audit names its targets), never behaviour
    if source < 0:
        return f"imports {target}: a leaf imports only leaves and models"
    if _within(target, SHARED_MODELS) and (not _is_shell_module(target) or _within(target, SHELL)):
        return None
    if LAYERS[source] == "calvin.chat" and _within(target, CHAT_READS):
        return None
    return f"imports {target}, a layer above ({LAYERS[source]} → {LAYERS[rank]})"


def violations() -> list[str]:
    found = []
    for module, path in modules():
        seen = set()
        for line, target in imported(path, module):
            why = problem(module, target)
            if why and (line, why) not in seen:
                seen.add((line, why))
                found.append(f"{path.relative_to(ROOT)}:{line}: {module} {why}")
    return found


def test_imports_run_one_way():
    found = violations()
    assert not found, f"{len(found)} imports go up or across the layers:\n" + "\n".join(found)


def test_the_rule_sees_each_kind_of_violation():
    # The checker itself: each forbidden arrow is caught, each allowed one is not.
    assert problem("sessions.services", "calvin.dashboard.events")  # the shell
    assert problem("sessions.services", "calvin.chat.slack.outbox")  # a layer above
    assert problem("approvals.services", "tools.services.common")
    assert problem("calvin.workspaces.services", "sessions.services")
    assert problem("secrets_vault.requests", "approvals.cards")  # across: vault below approvals
    assert problem("calvin.chat.slack.lanes", "tools.services.common")  # chat reads tools' models only
    assert problem("approvals.services", "calvin.dashboard.models")  # the shell's models are the shell's
    assert problem("approvals.services", "calvin.chat.web")  # an adapter, not the port
    assert problem("calvin.events", "sessions.services")  # a leaf reads models, never behaviour
    assert problem("calvin.chat.base", "calvin.chat.slack.outbox")  # the port knows no adapter
    assert problem("sessions.services", "tools.tasks")  # another app's task
    assert problem("tools.services.thread_posts", "approvals.tasks")  # downward, but a task all the same
    assert not problem("approvals.reactions", "approvals.tasks")  # its own
    assert not problem("approvals.services", "calvin.chat")  # the port
    assert not problem("calvin.audit.services", "sessions.models")
    assert not problem("tools.effects", "calvin.chat")
    assert not problem("calvin.chat.slack.outbox", "tools.models")
    assert not problem("approvals.services", "tools.models")
    assert not problem("sessions.turns", "calvin.audit.services")
    assert not problem("sessions.turns", "calvin.events")
    assert not problem("tools.services.messages", "sessions.services")


def test_the_walk_reads_deferred_and_relative_imports(tmp_path):
    source = tmp_path / "services.py"
    source.write_text(
        "def f():\n    from calvin.dashboard.events import thread_group\n"
        "from . import tasks\n"
        "import_string('tools.tasks.apply_tool_call')\n"
    )
    found = list(imported(source, "sessions.services"))
    assert (2, "calvin.dashboard.events") in found
    assert (3, "sessions.tasks") in found
    assert (4, "tools.tasks") in found
