"""What ncl can do: each resource's verbs, as data, so the parser, `ncl help` and the calls agree.

A verb names its API path (`{id}` and the like filled from its arguments), its query flags
(passed to the API as they are; the API checks them, so ncl never holds a second copy of a
rule), and the columns of its table.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Flag:
    name: str  # --name on the command line; the API's query parameter of the same name
    help: str
    integer: bool = False


@dataclass(frozen=True)
class Verb:
    name: str
    summary: str
    path: str
    method: str = "GET"
    arguments: tuple[str, ...] = ()  # positional ids, in the path's order
    flags: tuple[Flag, ...] = ()
    columns: tuple[str, ...] = ()  # a list's table; a single object is shown whole
    paged: bool = False
    people_only: bool = False  # shown in help as such; the API is what refuses an agent


@dataclass(frozen=True)
class Resource:
    name: str
    summary: str
    verbs: tuple[Verb, ...]
    aliases: tuple[str, ...] = ()
    notes: str = ""

    def verb(self, name: str) -> Verb:
        return next(verb for verb in self.verbs if verb.name == name)


@dataclass(frozen=True)
class Catalog:
    resources: tuple[Resource, ...] = field(default_factory=tuple)

    def find(self, name: str) -> Resource | None:
        return next((r for r in self.resources if name == r.name or name in r.aliases), None)


AGENT = Flag("agent", "only this agent's (an id; `ncl agents list` shows them)", integer=True)
SESSION = Flag("session", "only this session's (an id)", integer=True)

CATALOG = Catalog(
    (
        Resource(
            "agents",
            "The workspace's agents (NanoClaw's groups): name, model, tool sets, packages, cli_scope.",
            aliases=("groups",),
            verbs=(
                Verb(
                    "list",
                    "List the agents you can see",
                    "/agents",
                    columns=("id", "name", "cli_scope", "model", "paused"),
                    paged=True,
                ),
                Verb("get", "Show one agent", "/agents/{agent_id}", arguments=("agent_id",)),
            ),
        ),
        Resource(
            "destinations",
            "Where an agent's send_message and send_file may go: threads and other agents.",
            verbs=(
                Verb(
                    "list",
                    "List an agent's destinations (an agent's own by default)",
                    "/agents/{agent}/destinations",
                    flags=(AGENT,),
                    columns=("id", "name", "kind", "thread_id", "target_agent_id"),
                    paged=True,
                ),
            ),
        ),
        Resource(
            "members",
            "The workspace's people and their roles.",
            verbs=(
                Verb(
                    "list",
                    "List the workspace's members",
                    "/members",
                    columns=("id", "name", "role", "created_at"),
                    paged=True,
                ),
            ),
        ),
        Resource(
            "sessions",
            "Sessions (a thread each): their status, messages, and stopping one.",
            notes="An agent's `stop` answers approval-pending (exit code 3): it runs once a person approves.",
            verbs=(
                Verb(
                    "list",
                    "List sessions, newest first",
                    "/sessions",
                    flags=(Flag("status", "only sessions in this status (e.g. running, idle, stopped)"), AGENT),
                    columns=("id", "status", "channel", "agent_id", "host", "title"),
                    paged=True,
                ),
                Verb("get", "Show one session", "/sessions/{session_id}", arguments=("session_id",)),
                Verb(
                    "messages",
                    "List a session's messages, newest first",
                    "/sessions/{session_id}/messages",
                    arguments=("session_id",),
                    columns=("id", "created_at", "author", "kind", "text"),
                    paged=True,
                ),
                Verb(
                    "stop",
                    "Stop a session's running and queued turns",
                    "/sessions/{session_id}/stop",
                    method="POST",
                    arguments=("session_id",),
                ),
            ),
        ),
        Resource(
            "approvals",
            "What waits for a person's decision, and what was decided.",
            notes="Only people approve or deny; an agent reads.",
            verbs=(
                Verb(
                    "list",
                    "List approvals, newest first",
                    "/approvals",
                    flags=(
                        Flag("status", "only approvals in this status (pending, approved, denied, expired)"),
                        SESSION,
                    ),
                    columns=("id", "status", "session_id", "kind", "summary"),
                    paged=True,
                ),
                Verb(
                    "get",
                    "Show one approval, with everything it would run",
                    "/approvals/{approval_id}",
                    arguments=("approval_id",),
                ),
                Verb(
                    "approve",
                    "Approve it: what it shows runs",
                    "/approvals/{approval_id}/approve",
                    method="POST",
                    arguments=("approval_id",),
                    people_only=True,
                ),
                Verb(
                    "deny",
                    "Deny it: nothing runs",
                    "/approvals/{approval_id}/deny",
                    method="POST",
                    arguments=("approval_id",),
                    people_only=True,
                ),
            ),
        ),
        Resource(
            "tool-calls",
            "Every tool call the agents made, with its arguments (secrets redacted) and outcome.",
            verbs=(
                Verb(
                    "list",
                    "List tool calls, newest first",
                    "/tool-calls",
                    flags=(
                        SESSION,
                        Flag("status", "only calls in this status"),
                        Flag("tool", "only calls of this tool"),
                    ),
                    columns=("id", "created_at", "session_id", "server", "tool", "status"),
                    paged=True,
                ),
                Verb("get", "Show one tool call", "/tool-calls/{call_id}", arguments=("call_id",)),
            ),
        ),
        Resource(
            "audit",
            "The workspace's audit log (owners, admins, and agents with cli_scope global).",
            verbs=(
                Verb(
                    "list",
                    "List audit events, newest first",
                    "/audit-events",
                    flags=(Flag("verb", "only events of this verb (e.g. approval.approve)"),),
                    columns=("id", "at", "verb", "actor_label", "target_type", "target_label", "via"),
                    paged=True,
                ),
            ),
        ),
    )
)
