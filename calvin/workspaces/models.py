"""Tenancy: a workspace, its people, its repositories, its quota and its agents."""

import re
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from calvin.workspaces import code_channel_rules, egress_rules, repository_rules
from calvin.workspaces.time_zones import validate_time_zone


def validate_egress_allowlist(value):
    _, problems = egress_rules.allowlist_parse(egress_rules.allowlist_lines(value))
    if problems:
        raise ValidationError([ValidationError(problem, code="egress_entry") for problem in problems])


class Workspace(models.Model):
    class Egress(models.TextChoices):
        OPEN = egress_rules.OPEN, "open: any public address"
        ALLOWLIST = egress_rules.ALLOWLIST, "allowlist: only the hosts and ports listed"
        NONE = egress_rules.NONE, "none: only the gateway"

    class SelfModificationDeciders(models.TextChoices):
        ADMINS = "admins", "the workspace's owners and admins"
        ADMINS_AND_OWNER = "admins-and-owner", "owners and admins, and the person who started the session"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    # Set once the Slack app is installed into a Slack workspace (team).
    slack_team_id = models.CharField(max_length=32, blank=True, default="")
    # How long a fire-and-forget approval request waits for a decision before it expires.
    approval_timeout = models.DurationField(default=timedelta(hours=24))
    # Where its agents' traffic may go (the host's egress proxy enforces it). `open` by default:
    # agents keep reaching package registries and model APIs, while the host's loopback,
    # metadata and private addresses are refused in every mode.
    egress_policy = models.CharField(
        max_length=10,
        choices=Egress.choices,
        default=Egress.OPEN,
        help_text="The gateway is reachable in every mode; loopback, metadata and private addresses never, "
        "unless an allowlist entry names that host or address and port exactly.",
    )
    egress_allowlist = models.TextField(
        blank=True,
        default="",
        validators=[validate_egress_allowlist],
        help_text=f"One host:port a line (pypi.org:443, *.npmjs.org:443, 10.0.0.5:5432, [2001:db8::1]:443); at most "
        f"{egress_rules.MAX_ENTRIES}. Used by allowlist, and by open to name a private or loopback address.",
    )
    # Where a scheduled task's cron is read unless the task names a zone of its own.
    time_zone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], help_text="An IANA name, e.g. Europe/Berlin."
    )
    # Who decides an agent's changes to itself (install_packages, add_mcp_server, create_agent).
    # Seed 002: "an admin gets an approval card"; the session's owner too only where a workspace says so.
    self_modification_deciders = models.CharField(
        max_length=20,
        choices=SelfModificationDeciders.choices,
        default=SelfModificationDeciders.ADMINS,
        help_text="Who may approve an agent's install_packages, add_mcp_server and create_agent.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["slack_team_id"],
                condition=~Q(slack_team_id=""),
                name="workspace_unique_slack_team",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def egress_entries(self) -> list[str]:
        """The allowlist's entries, normalised (a host checks them again)."""
        entries, _ = egress_rules.allowlist_parse(egress_rules.allowlist_lines(self.egress_allowlist))
        return [str(entry) for entry in entries]


class Member(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="members")
    # A Slack-only person has no Django login until they sign in to the dashboard.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memberships",
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    slack_user_id = models.CharField(max_length=32, blank=True, default="")
    display_name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "user"],
                condition=Q(user__isnull=False),
                name="member_unique_user_per_workspace",
            ),
            models.UniqueConstraint(
                fields=["workspace", "slack_user_id"],
                condition=~Q(slack_user_id=""),
                name="member_unique_slack_user_per_workspace",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or (self.user.get_username() if self.user else self.slack_user_id)

    @property
    def is_admin(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.ADMIN)


def _repository_check(problem):
    def check(value):
        text = problem(value)
        if text:
            raise ValidationError(text)

    return check


def validate_repository_name(value):
    _repository_check(repository_rules.name_problem)(value)


def validate_full_name(value):
    _repository_check(repository_rules.full_name_problem)(value)


def validate_branch(value):
    _repository_check(repository_rules.branch_problem)(value)


def validate_clone_url(value):
    """Checked against the schemes this gateway allows (settings.CALVIN_REPOSITORY_SCHEMES)."""
    text = repository_rules.clone_url_problem(value, allowed_schemes=settings.CALVIN_REPOSITORY_SCHEMES)
    if text:
        raise ValidationError(text)


class Repository(models.Model):
    """One repository of a workspace's definition: what checkout_repo may check out.

    Names are unique per workspace whatever their case, as agents name them case-insensitively.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="repositories")
    name = models.CharField(
        max_length=repository_rules.MAX_NAME,
        validators=[validate_repository_name],
        help_text="Short name agents use in checkout_repo; the checkout's directory in the session.",
    )
    full_name = models.CharField(
        max_length=repository_rules.MAX_FULL_NAME, validators=[validate_full_name], help_text="owner/name"
    )
    clone_url = models.CharField(max_length=repository_rules.MAX_CLONE_URL, validators=[validate_clone_url])
    default_branch = models.CharField(
        max_length=repository_rules.MAX_BRANCH, default="main", validators=[validate_branch]
    )
    # An unpublished repository is listed but checkout_repo refuses it.
    published = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "repositories"
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(Lower("name"), "workspace", name="repository_unique_name"),
            models.UniqueConstraint(Lower("full_name"), "workspace", name="repository_unique_full_name"),
        ]

    def __str__(self) -> str:
        return self.full_name


class CodeChannel(models.Model):
    """A Slack channel or a web space bound to one of its workspace's repositories: a session
    started there has the repository checked out before its first turn, and spawn_thread from it
    posts in the owner's direct messages (seed 000). Bound in the admin (calvin/workspaces/code_channels.py)."""

    class Kind(models.TextChoices):
        SLACK = code_channel_rules.SLACK, "Slack channel"
        WEB = code_channel_rules.WEB, "web space"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="code_channels")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.SLACK)
    channel = models.CharField(
        max_length=code_channel_rules.MAX_CHANNEL,
        help_text="Slack: the channel's id (C0123ABCD, at the bottom of its details in Slack). Web: the space's "
        "name (small letters, digits and dashes), offered when a thread is started on the dashboard.",
    )
    # Same workspace: clean() and the services say so (a constraint cannot reach across the join).
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="code_channels")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "channel"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "kind", "channel"],
                name="codechannel_unique_channel",
                violation_error_message="This channel is already a code channel of this workspace.",
            ),
            # Slack channel ids are Slack's, not a workspace's: one binding decides, whoever typed the id.
            models.UniqueConstraint(
                fields=["channel"],
                condition=Q(kind="slack"),
                name="codechannel_slack_one_workspace",
                violation_error_message="This Slack channel is already a code channel (each Slack channel is "
                "bound in one workspace only).",
            ),
        ]

    def __str__(self) -> str:
        return f"{code_channel_rules.channel_label(self.channel)} → {self.repository}"

    @property
    def label(self) -> str:
        return code_channel_rules.channel_label(self.channel)

    def clean(self):
        problem = code_channel_rules.channel_problem(self.kind, self.channel)
        if problem:
            raise ValidationError({"channel" if self.kind in self.Kind.values else "kind": problem})
        if self.repository_id is not None and self.workspace_id is not None:
            of = Repository.objects.filter(id=self.repository_id).values_list("workspace_id", flat=True).first()
            if of != self.workspace_id:
                raise ValidationError({"repository": "Choose a repository of this code channel's own workspace."})


class Quota(models.Model):
    """What a workspace may use. Days and months are UTC calendar days and months."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="quota")
    concurrent_sessions = models.PositiveIntegerField(default=10, help_text="Sessions whose agent runs at once.")
    turns_per_day = models.PositiveIntegerField(default=2_000)
    agent_minutes_per_month = models.PositiveIntegerField(default=30_000)
    tool_calls_per_day = models.PositiveIntegerField(default=10_000)
    storage_mib = models.PositiveIntegerField(default=10_240)
    # Empty: no cap. Spend is what providers report (Claude Code's total_cost_usd).
    monthly_spend_cap_usd = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True, help_text="USD per UTC calendar month."
    )
    session_spend_cap_usd = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True, help_text="USD per session."
    )
    # spawn_thread: how deep a tree of spawned threads may grow (the root is depth 0), and how many
    # spawned sessions under one root may be alive at once (runaway spawning elsewhere taught both).
    spawn_depth_max = models.PositiveIntegerField(
        default=3, help_text="How many levels of spawned threads below a root."
    )
    spawn_live_descendants_max = models.PositiveIntegerField(
        default=20, help_text="Spawned sessions alive at once under one root session."
    )

    def __str__(self) -> str:
        return f"Quota for {self.workspace}"


class DailyUsage(models.Model):
    """One workspace's use on one UTC day; counted with conditional UPDATEs against its Quota."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="usage")
    day = models.DateField()
    tool_calls = models.PositiveIntegerField(default=0)
    turns = models.PositiveIntegerField(default=0)
    agent_seconds = models.PositiveIntegerField(default=0)
    # What the providers reported the day's finished turns cost (0 where none reported a cost).
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)

    class Meta:
        verbose_name_plural = "daily usage"
        constraints = [models.UniqueConstraint(fields=["workspace", "day"], name="dailyusage_unique_day")]

    def __str__(self) -> str:
        return f"{self.workspace} on {self.day}"


class SpendNotice(models.Model):
    """A spend threshold (80 or 100 % of the monthly cap) a workspace crossed in a month: its
    one row is the claim that the owners are told once, however many turns cross it at once."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="spend_notices")
    month = models.DateField(help_text="The first day of the UTC month.")
    threshold = models.PositiveSmallIntegerField(help_text="Percent of the monthly spend cap.")
    cap_usd = models.DecimalField(max_digits=10, decimal_places=2)
    spent_usd = models.DecimalField(max_digits=14, decimal_places=6)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "month", "threshold"], name="spendnotice_once_per_month")
        ]

    def __str__(self) -> str:
        return f"{self.threshold} % of {self.workspace}'s spend cap in {self.month:%Y-%m}"


class StorageUsage(models.Model):
    """Bytes of files a workspace has stored in Calvin's storage, counted with a conditional
    UPDATE against Quota.storage_mib before the bytes are stored (calvin/workspaces/storage.py)."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="storage")
    bytes = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.workspace}: {self.bytes} bytes stored"


TOOL_SETS = ("calvin", "nanoclaw")


def all_tool_sets() -> list[str]:
    return list(TOOL_SETS)


class Agent(models.Model):
    """A NanoClaw "group": persistent config and a workspace directory its sessions share."""

    class CliScope(models.TextChoices):
        DISABLED = "disabled"
        GROUP = "group"
        GLOBAL = "global"

    class Provider(models.TextChoices):
        """What a runner starts for each turn (sessions/host/providers.py)."""

        CLAUDE_CODE = "claude-code"  # the claude CLI, headless, resumed per turn
        COMMAND = "command"  # any executable: the prompt on stdin, stdout as the reply
        SCRIPT = "script"  # a file of MCP tool calls played through /mcp, for demos and tests
        # Run by a person with issue_token's .mcp.json, outside Calvin: no host runs it.
        EXTERNAL = "external"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    instructions = models.TextField(blank=True, default="")
    # create_agent is approval-gated unless the agent's scope is global.
    cli_scope = models.CharField(max_length=10, choices=CliScope.choices, default=CliScope.GROUP)
    model = models.CharField(max_length=20, default="default")
    apt_packages = models.JSONField(default=list, blank=True)
    npm_packages = models.JSONField(default=list, blank=True)
    # {name: {"command": ..., "args": [...], "env": {...}}}
    mcp_servers = models.JSONField(default=dict, blank=True)
    # Bumped when the packages change: the runner rebuilds the agent's environment before its next start.
    environment_version = models.PositiveIntegerField(default=1)
    # Which MCP servers its sessions are given: "calvin" (/mcp) and "nanoclaw" (/mcp/nanoclaw).
    tool_sets = models.JSONField(default=all_tool_sets, blank=True)
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.CLAUDE_CODE)
    # command: the argv (a JSON list, never a shell line); script: the calls, as JSON text.
    provider_command = models.JSONField(default=list, blank=True)
    provider_script = models.TextField(blank=True, default="")
    # The agent's own persistent workspace directory (NanoClaw's groups/<name>/), relative to
    # the state directory of each host that runs its sessions.
    directory = models.CharField(max_length=500, blank=True, default="")
    created_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="created_agents"
    )
    # Paused by an operator: its sessions take no new turns (queued ones wait) until resumed.
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="agent_unique_name")]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        unknown = [s for s in self.tool_sets or [] if s not in TOOL_SETS]
        if not isinstance(self.tool_sets, list) or unknown:
            raise ValidationError({"tool_sets": f"a list of tool sets among {', '.join(TOOL_SETS)}"})


def destination_name_normalise(name: str) -> str:
    """Lowercase words joined by single dashes: "Worker 1" -> "worker-1"."""
    return re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")


class Destination(models.Model):
    """One name in an agent's destination map: a chat (a thread, or a Slack channel's top
    level as a thread with an empty thread_ts) or another agent. The map is the agent's
    permission list for send_message and send_file."""

    # Names every session has without a row: its own thread. Not storable.
    RESERVED = ("thread",)

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="destinations")
    name = models.CharField(max_length=64, help_text="Lowercase with dashes; normalised on save.")
    thread = models.ForeignKey(
        "agent_sessions.Thread", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    target_agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="destination_unique_name"),
            models.CheckConstraint(
                condition=Q(thread__isnull=True, target_agent__isnull=False)
                | Q(thread__isnull=False, target_agent__isnull=True),
                name="destination_one_target",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs):
        self.name = destination_name_normalise(self.name)  # the invariant holds however the row is written
        super().save(*args, **kwargs)

    @property
    def is_agent(self) -> bool:
        return self.target_agent_id is not None

    def clean(self):
        self.name = destination_name_normalise(self.name)
        if not self.name:
            raise ValidationError({"name": "a name needs at least one letter or digit"})
        if self.name in self.RESERVED:
            raise ValidationError({"name": f"{self.name} is reserved: it always means the session's own thread"})
        if (self.thread_id is None) == (self.target_agent_id is None):
            raise ValidationError("choose either a thread or an agent")
        workspace_id = self.agent.workspace_id
        target = self.thread if self.thread_id else self.target_agent
        if target.workspace_id != workspace_id:
            raise ValidationError("a destination must be in the agent's own workspace")
        if self.target_agent_id == self.agent_id:
            raise ValidationError("an agent is not its own destination")
