"""PendingApproval: a host-side decision on something an agent asked to do; ApprovalRule: a
person's standing "allow" for Claude Code's permission prompts of one session or one agent."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from approvals.rules import rule_label


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
        RULE = "rule"  # a permission prompt answered by an ApprovalRule, nobody asked

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
    # When the people who may decide were reminded of it (once: CALVIN_APPROVAL_REMIND_MINUTES after
    # the request); set by the conditional update that claims the reminder.
    reminded_at = models.DateTimeField(null=True, blank=True)
    # The rule that answered this permission prompt at once (decided_via "rule"), named on its card.
    allowed_by_rule = models.ForeignKey(
        "approvals.ApprovalRule", null=True, blank=True, on_delete=models.SET_NULL, related_name="answered"
    )

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


class ApprovalRule(models.Model):
    """Allow a Claude Code permission prompt without asking: the exact tool, and for Bash the
    exact command prefix a person chose (approvals/rules.py says which prefixes and which
    commands), in one session or in every session of one agent. Made by pressing "Allow for
    this session" / "Allow always for this agent" on a prompt's card; revoked, never edited or
    deleted, so what it answered stays explained."""

    class Scope(models.TextChoices):
        SESSION = "session", "this session"
        AGENT = "agent", "this agent"

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="approval_rules")
    scope = models.CharField(max_length=10, choices=Scope.choices)
    # A session rule keeps its session's agent too, so the agent's page lists it.
    session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.CASCADE, related_name="approval_rules"
    )
    agent = models.ForeignKey(
        "workspaces.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="approval_rules"
    )
    tool_name = models.CharField(max_length=200, help_text="Matched exactly (Bash, Edit, mcp__github__create_pr).")
    command_prefix = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="Bash only: the command's leading words, matched on a word boundary with nothing chained after.",
    )
    created_by = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="approval_rules_made"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The prompt whose card made it (approved in the same transaction).
    made_from = models.ForeignKey(
        PendingApproval, null=True, blank=True, on_delete=models.SET_NULL, related_name="rules_made"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_matched_at = models.DateTimeField(null=True, blank=True)
    match_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(
                name="approval_rule_scope_target",
                condition=Q(scope="session", session__isnull=False)
                | Q(scope="agent", agent__isnull=False, session__isnull=True),
            ),
            models.CheckConstraint(
                name="approval_rule_bash_has_prefix", condition=~Q(tool_name="Bash") | ~Q(command_prefix="")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.get_scope_display()})"

    @property
    def label(self) -> str:
        return rule_label(self.tool_name, self.command_prefix)
