"""ToolCall: the outbox a worker applies from, and the audit trail of what agents asked."""

from django.db import models
from django.utils import timezone


class ToolCall(models.Model):
    class Status(models.TextChoices):
        AWAITING_APPROVAL = "awaiting_approval"
        PENDING = "pending"
        APPLYING = "applying"
        APPLIED = "applied"
        FAILED = "failed"
        DENIED = "denied"
        EXPIRED = "expired"

    class Server(models.TextChoices):
        CALVIN = "calvin"
        NANOCLAW = "nanoclaw"
        NCL = "ncl"  # an agent's write through the API, once a person approved it

    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="tool_calls")
    runner = models.ForeignKey(
        "agent_sessions.Runner", null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    # Which MCP server it came through: both have a send_file, in different shapes.
    server = models.CharField(max_length=10, choices=Server.choices, default=Server.CALVIN)
    tool = models.CharField(max_length=40)
    # Secret values are redacted before they are stored here.
    arguments = models.JSONField(default=dict)
    # What the effect needs beyond the arguments (rendered blocks, stored file).
    payload = models.JSONField(default=dict, blank=True)
    file = models.FileField(upload_to="tool-files/%Y/%m/%d", blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True)
    # Redacted too (tools.effects.tool_call_fail): a platform's error may quote what was sent.
    error = models.TextField(blank=True, default="")
    # Ids the chat platform gave the effect (message id, Slack ts, file id).
    platform_ids = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # When a worker last claimed it, or (while pending) when the sweep last queued it again.
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "created_at"]),
            # The dashboard's charts read a time range of calls (calvin/dashboard/chart_selectors.py):
            # covering, so the range's session and tool come from the index alone (bench/charts.py).
            models.Index(fields=["created_at"], include=["session", "tool"], name="toolcall_created_covering"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} #{self.pk} ({self.status})"

    @classmethod
    def claim(cls, tool_call_id: int) -> bool:
        """pending -> applying; true only for the one caller whose update changed the row."""
        return (
            cls.objects.filter(id=tool_call_id, status=cls.Status.PENDING).update(
                status=cls.Status.APPLYING,
                claimed_at=timezone.now(),
                attempts=models.F("attempts") + 1,
            )
            == 1
        )


class Question(models.Model):
    """ask_user_question's card: open until the first tap by someone who may see the thread, or its timeout."""

    class Status(models.TextChoices):
        OPEN = "open"
        ANSWERED = "answered"
        EXPIRED = "expired"

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="question")
    title = models.CharField(max_length=200)
    text = models.TextField()
    # [{label, selectedLabel, value}], normalised: a plain string is its own label and value.
    options = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    expires_at = models.DateTimeField()
    answer_index = models.PositiveIntegerField(null=True, blank=True)
    answered_by = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.title} ({self.status})"


class CardChoice(models.Model):
    """A person's choice on a send_card action with a value: delivered to the agent once per person."""

    message = models.ForeignKey("agent_sessions.Message", on_delete=models.CASCADE, related_name="choices")
    member = models.ForeignKey("workspaces.Member", on_delete=models.CASCADE, related_name="+")
    action_index = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "member"], name="cardchoice_once_per_person")]

    def __str__(self) -> str:
        return f"choice {self.action_index} on #{self.message_id}"


class InboxFile(models.Model):
    """A file sent to another agent (NanoClaw's send_file to an agent destination): stored once
    at send time, and written into that agent's own directory as inbox/<sender>/<name> by each
    host that runs one of its sessions, before the session's next turn (sessions/host/inbox.py)."""

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("workspaces.Agent", on_delete=models.CASCADE, related_name="inbox_files")
    # The send_file call: its count, its audit record. The file outlives the sender's session.
    tool_call = models.OneToOneField(
        ToolCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="inbox_file"
    )
    sender_agent = models.ForeignKey(
        "workspaces.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # <from> and <name>: single path components, safe on any host (tools/services/inbox_files.py).
    sender = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    file = models.FileField(max_length=200)  # the stored copy, as checked at send time
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Never two files at one path: a second report.txt is stored as report-2.txt.
            models.UniqueConstraint(fields=["agent", "sender", "name"], name="inboxfile_unique_path"),
        ]

    def __str__(self) -> str:
        return self.path

    @property
    def path(self) -> str:
        """Where it lands, relative to the agent's directory ($CALVIN_AGENT_DIR)."""
        return f"inbox/{self.sender}/{self.name}"


class InboxDelivery(models.Model):
    """A host has the inbox file in its copy of the agent's directory: it is not sent there again
    (the agent may move or delete it once read)."""

    file = models.ForeignKey(InboxFile, on_delete=models.CASCADE, related_name="deliveries")
    host = models.ForeignKey("agent_sessions.Host", on_delete=models.CASCADE, related_name="+")
    delivered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["file", "host"], name="inboxdelivery_once_per_host")]

    def __str__(self) -> str:
        return f"{self.file_id} on host {self.host_id}"
