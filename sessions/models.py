"""Threads, the sessions that live in them, the runners that run them, and the transcript."""

from django.db import models
from django.db.models import Q
from django.utils import timezone


class Thread(models.Model):
    class ChannelKind(models.TextChoices):
        WEB = "web"
        SLACK = "slack"

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="threads")
    channel_kind = models.CharField(max_length=10, choices=ChannelKind.choices, default=ChannelKind.WEB)
    # Slack: channel id and the root message's ts. Web: "web" and a generated key.
    channel_id = models.CharField(max_length=64)
    thread_ts = models.CharField(max_length=64)
    title = models.CharField(max_length=200, blank=True, default="")
    started_by = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="threads"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "channel_kind", "channel_id", "thread_ts"],
                name="thread_unique_platform_ids",
            )
        ]

    def __str__(self) -> str:
        return self.title or f"{self.channel_kind}:{self.channel_id}/{self.thread_ts}"


class Host(models.Model):
    """A machine that runs agents: `manage.py host` dials out to /ws/host/ with this host's token.

    The token is shown once and stored as a digest; revoking it closes the connection.
    A host with a workspace runs only that workspace's sessions; one without serves all.
    """

    name = models.CharField(max_length=100, unique=True)
    workspace = models.ForeignKey(
        "workspaces.Workspace", null=True, blank=True, on_delete=models.CASCADE, related_name="hosts"
    )
    token_digest = models.CharField(max_length=64, unique=True)
    token_hint = models.CharField(max_length=12)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # What the daemon said when it registered.
    capacity = models.PositiveIntegerField(default=0, help_text="Sessions it runs at once, as it registered.")
    version = models.CharField(max_length=40, blank=True, default="")
    sandbox = models.CharField(max_length=20, blank=True, default="", help_text="bwrap, or none")
    # The connection: the channel its consumer listens on (empty when not connected).
    channel_name = models.CharField(max_length=200, blank=True, default="")
    connected_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["last_heartbeat_at"])]

    def __str__(self) -> str:
        return self.name


class Session(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        IDLE = "idle"
        FINISHED = "finished"
        FAILED = "failed"

    class PermissionMode(models.TextChoices):
        DEFAULT = "default"
        ACCEPT_EDITS = "acceptEdits"
        PLAN = "plan"
        BYPASS = "bypassPermissions"

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="sessions")
    agent = models.ForeignKey(
        "workspaces.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    thread = models.OneToOneField(Thread, on_delete=models.CASCADE, related_name="session")
    owner = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    permission_mode = models.CharField(max_length=20, choices=PermissionMode.choices, default=PermissionMode.DEFAULT)
    model = models.CharField(max_length=20, default="default")
    directory = models.CharField(max_length=500, help_text="The session directory on the runner's host.")
    temp_directory = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="The session's own temp directory on its host (its runner's TMPDIR); never the shared /tmp.",
    )
    branch = models.CharField(max_length=200, blank=True, default="")
    # The host it runs on: sticky while that host lives, cleared when its heartbeat lapses.
    # None: a session whose directory is on the gateway (a runner made with issue_token).
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions")
    # The provider's own conversation id (Claude Code's session_id), to resume the next turn.
    agent_session_id = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["workspace", "status"])]

    def __str__(self) -> str:
        return f"Session {self.pk} ({self.status})"

    def may_be_decided_by(self, member) -> bool:
        """Who decides for this session (approvals, its agent's questions): the person who
        started it, or an owner or admin of its workspace; never a member of another."""
        if member is None or member.workspace_id != self.workspace_id:
            return False
        return member.is_admin or member.id == self.owner_id


class Turn(models.Model):
    """One message for the agent. The scheduler claims all of a session's queued turns at
    once, so messages that arrived during a turn reach the next one together, in order."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        STOPPED = "stopped"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    prompt = models.ForeignKey("Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    runner = models.ForeignKey("Runner", null=True, blank=True, on_delete=models.SET_NULL, related_name="turns")
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="turns")
    # The first turn of the batch it ran in (itself for the first).
    batch = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # A scheduled task's script: the host runs it first and wakes the agent only on {"wakeAgent": true}.
    gate_script = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # What the turn used, as its provider reported it (Claude Code's stream-json `result`); a
    # provider that reports nothing leaves the tokens at 0 and cost_usd empty: minutes only.
    agent_seconds = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # What the turn may spend, reserved against the monthly spend cap when it was admitted
    # (sessions/scheduling.py); empty in a workspace without a cap.
    budget_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"Turn {self.pk} ({self.status})"


class Runner(models.Model):
    """One generation of the process that runs a session's agent.

    The bearer token the agent presents to /mcp belongs to one generation and is
    stored only as a digest. A restart is a new generation, so per-runner counts
    start again from zero.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runners")
    # The host that started it (for a turn it was given): only that host may end it. None: a
    # runner made with issue_token (or by `up`), run wherever its person runs it; no host
    # ever touches it. Never identified by a name, which any admin can choose for a host.
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="runners")
    generation = models.PositiveIntegerField()
    token_digest = models.CharField(max_length=64, unique=True)
    token_hint = models.CharField(max_length=12, help_text="First characters of the token, for recognising it.")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # When its refusal pause ends, a Unix time (tools/refusals.py): read with the caller on every
    # call, so the pause costs a tool call nothing more and needs no Redis.
    refusals_paused_until = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "generation"], name="runner_unique_generation"),
        ]

    def __str__(self) -> str:
        where = f"on host {self.host}" if self.host_id else "issued (no host)"
        return f"Runner {self.session_id}.{self.generation} {where}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class RunnerCount(models.Model):
    """How many times one runner generation has used a limited tool."""

    runner = models.ForeignKey(Runner, on_delete=models.CASCADE, related_name="counts")
    tool = models.CharField(max_length=40)
    used = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["runner", "tool"], name="runnercount_unique_tool"),
        ]

    def __str__(self) -> str:
        return f"{self.tool}: {self.used}"


class Message(models.Model):
    """The thread's transcript. Its id is the message id the agent sees."""

    class Kind(models.TextChoices):
        TEXT = "text"
        FILE = "file"
        CARD = "card"
        SYSTEM = "system"

    class Author(models.TextChoices):
        PERSON = "person"
        AGENT = "agent"
        SYSTEM = "system"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TEXT)
    author = models.CharField(max_length=10, choices=Author.choices)
    member = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    # Another agent's message in this session's inbox (send_message to an agent).
    sender_agent = models.ForeignKey(
        "workspaces.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = models.TextField(blank=True, default="")
    # Card: the validated spec (web rendering) and its Block Kit rendering (Slack).
    card = models.JSONField(null=True, blank=True)
    blocks = models.JSONField(null=True, blank=True)
    file = models.FileField(upload_to="thread-files/%Y/%m/%d", blank=True)
    file_name = models.CharField(max_length=255, blank=True, default="")
    file_title = models.CharField(max_length=200, blank=True, default="")
    file_alt_text = models.CharField(max_length=1000, blank=True, default="")
    content_type = models.CharField(max_length=100, blank=True, default="")
    file_size = models.PositiveBigIntegerField(default=0, help_text="Bytes stored for the file (storage quota).")
    # The tool call this message is the effect of: at most one message per call.
    tool_call = models.OneToOneField(
        "tools.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="message"
    )
    platform_ts = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # send_message's row exists from the call on, so its id can be returned at once; it is
    # part of the transcript only once the worker delivered it (None until then).
    delivered_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    edited_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["thread", "id"])]
        constraints = [
            models.CheckConstraint(condition=~Q(kind="file") | ~Q(file=""), name="message_file_kind_has_file"),
            # One Calvin message per platform message (Slack sends a mention as two events).
            models.UniqueConstraint(
                fields=["thread", "platform_ts"], condition=~Q(platform_ts=""), name="message_unique_platform_ts"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"

    INLINE_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")

    @property
    def is_inline_image(self) -> bool:
        return self.content_type in self.INLINE_IMAGE_TYPES

    @classmethod
    def transcript(cls):
        """Messages people see: delivered ones (a queued send_message is not shown yet)."""
        return cls.objects.filter(delivered_at__isnull=False)


class Reaction(models.Model):
    """An emoji shortcode on a message, by an agent (add_reaction) or a person."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="reactions")
    emoji = models.CharField(max_length=64, help_text="A shortcode such as thumbs_up, never the character.")
    agent = models.ForeignKey("workspaces.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    member = models.ForeignKey("workspaces.Member", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "emoji", "agent"], name="reaction_once_per_agent"),
            models.UniqueConstraint(fields=["message", "emoji", "member"], name="reaction_once_per_member"),
        ]

    def __str__(self) -> str:
        return f":{self.emoji}: on #{self.message_id}"
