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
    file: bool = False  # the flag names a file; its text is what is sent (--script PATH)

    @property
    def key(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class Verb:
    name: str
    summary: str
    path: str
    method: str = "GET"
    arguments: tuple[str, ...] = ()  # positional ids, in the path's order
    flags: tuple[Flag, ...] = ()
    body: tuple[Flag, ...] = ()  # a write's JSON body, from these flags (only those given)
    required: tuple[str, ...] = ()  # body flags it cannot do without
    columns: tuple[str, ...] = ()  # a list's table; a single object is shown whole
    paged: bool = False
    items_key: str = ""  # a single object whose list under this key is the table (usage's meters)
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

TASK = ("task_id",)
TASK_FIELDS = (
    Flag("prompt", "what the agent is told to do"),
    Flag("process-after", "one run at this time (ISO 8601; without an offset, in the task's time zone)"),
    Flag("recurrence", 'a five-field cron, e.g. "0 9 * * 1-5"'),
    Flag("timezone", "IANA time zone (default: the workspace's)"),
    Flag("recurrence-policy", "catch-up-latest | catch-up-all | skip-if-missed"),
    Flag("grace-window-seconds", "skip-if-missed: how late is too late (default 600)", integer=True),
    Flag("script", 'a script run first; the agent wakes only if it prints {"wakeAgent": true}', file=True),
)
TASKS = Resource(
    "tasks",
    "Scheduled tasks: a prompt for an agent, once (--process-after) or on a cron (--recurrence).",
    notes="An agent's changes answer approval-pending (exit code 3) and apply once a person approves.",
    verbs=(
        Verb(
            "list",
            "List tasks, newest first",
            "/tasks",
            flags=(Flag("status", "only tasks in this status (active, paused, cancelled, done)"), AGENT),
            columns=("id", "name", "status", "recurrence", "next_run_at", "agent_id"),
            paged=True,
        ),
        Verb("get", "Show one task", "/tasks/{task_id}", arguments=TASK),
        Verb(
            "runs",
            "List a task's runs, newest first",
            "/tasks/{task_id}/runs",
            arguments=TASK,
            columns=("id", "scheduled_for", "trigger", "status", "turn_id", "error"),
            paged=True,
        ),
        Verb(
            "create",
            "Make a task",
            "/tasks",
            method="POST",
            body=(Flag("name", "lowercase letters, digits and hyphens"), *TASK_FIELDS, AGENT),
            required=("name", "prompt"),
        ),
        Verb(
            "update",
            "Change a task (only the flags given)",
            "/tasks/{task_id}",
            method="PATCH",
            arguments=TASK,
            body=TASK_FIELDS,
        ),  # fmt: skip
        Verb("run", "Run it now, once", "/tasks/{task_id}/run", method="POST", arguments=TASK),
        Verb("pause", "Pause it", "/tasks/{task_id}/pause", method="POST", arguments=TASK),
        Verb(
            "resume",
            "Resume it (missed runs are not made up)",
            "/tasks/{task_id}/resume",
            method="POST",
            arguments=TASK,
        ),
        Verb("cancel", "Cancel it: it never runs again", "/tasks/{task_id}/cancel", method="POST", arguments=TASK),
        Verb("delete", "Delete it and its runs", "/tasks/{task_id}", method="DELETE", arguments=TASK),
    ),
)

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
        TASKS,
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
        Resource(
            "usage",
            "The workspace's quotas, what was used of them, and its days (people, and agents with cli_scope global).",
            verbs=(
                Verb(
                    "show",
                    "Each quota with what was used of it: today for daily ones, this month for the others",
                    "/usage",
                    columns=("key", "used", "limit", "unit", "percent", "resets"),
                    items_key="meters",
                ),
                Verb(
                    "days",
                    "The UTC days with any use, newest first",
                    "/usage",
                    flags=(Flag("days", "how many days back, today included (1..366; default 30)", integer=True),),
                    columns=("day", "tool_calls", "turns", "agent_seconds", "cost_usd"),
                    items_key="days",
                ),
            ),
        ),
    )
)
