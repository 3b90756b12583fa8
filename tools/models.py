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

    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="tool_calls")
    runner = models.ForeignKey(
        "agent_sessions.Runner", null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    tool = models.CharField(max_length=40)
    # Secret values are redacted before they are stored here.
    arguments = models.JSONField(default=dict)
    # What the effect needs beyond the arguments (rendered blocks, stored file).
    payload = models.JSONField(default=dict, blank=True)
    file = models.FileField(upload_to="tool-files/%Y/%m/%d", blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # Ids the chat platform gave the effect (message id, Slack ts, file id).
    platform_ids = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"])]

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
