"""PendingApproval: a host-side decision on something an agent asked to do."""

from django.db import models
from django.utils import timezone


class PendingApproval(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"
        APPLIED = "applied"
        FAILED = "failed"

    # Allowed transitions; anything else (a second click, a stale card) changes nothing.
    TRANSITIONS = {
        Status.PENDING: {Status.APPROVED, Status.DENIED, Status.EXPIRED},
        Status.APPROVED: {Status.APPLIED, Status.FAILED},
        # A chat platform refused for good what the applied effect had queued (a Slack post).
        Status.APPLIED: {Status.FAILED},
    }

    class Via(models.TextChoices):
        SLACK = "slack"
        WEB = "web"
        DASHBOARD = "dashboard"
        ADMIN = "admin"
        API = "api"  # /api/v1/ and ncl
        SYSTEM = "system"

    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="approvals")
    tool_call = models.OneToOneField(
        "tools.ToolCall", null=True, blank=True, on_delete=models.CASCADE, related_name="approval"
    )
    kind = models.CharField(
        max_length=60, help_text="The tool asked for (approval_prompt for a Claude Code permission prompt)."
    )
    summary = models.CharField(max_length=300)
    # Everything being approved, shown in full on the card (never hidden args or env).
    details = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    requested_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    decided_via = models.CharField(max_length=10, choices=Via.choices, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Where the approval card lives, so it can be edited in place.
    card_platform_ids = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.kind} ({self.status})"

    @classmethod
    def transition(cls, approval_id: int, *, source: str, target: str, **fields) -> bool:
        """Compare-and-swap source -> target; true only if this call made the change.

        A pending approval is decided (approved, denied) only before its expires_at, so a
        click after it changes nothing even before the sweep ran; it expires only after.
        """
        if target not in cls.TRANSITIONS.get(source, ()):
            raise ValueError(f"no transition {source} -> {target}")
        now = timezone.now()
        rows = cls.objects.filter(id=approval_id, status=source)
        if source == cls.Status.PENDING:
            expired = target == cls.Status.EXPIRED
            rows = rows.filter(expires_at__lte=now) if expired else rows.filter(expires_at__gt=now)
        stamp = {"decided_at": now} if source == cls.Status.PENDING else {"finished_at": now}
        return rows.update(status=target, **stamp, **fields) == 1
