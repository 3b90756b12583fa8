"""A preview: a name (the label of its URL) given to a port of a session's sandbox.

A row lives from `preview` until it is taken down (`unpreview`, the thread page, the admin),
its session stops, its host is deleted, or its expiry passes; then `removed_at` and
`removed_reason` say when and why, and the name is free again. Rows are kept for the record.
"""

from django.db import models
from django.db.models import Q
from django.utils import timezone


class PreviewQuerySet(models.QuerySet):
    def live(self, now=None):
        """Not taken down and not expired: what is served."""
        now = now or timezone.now()
        return self.filter(removed_at__isnull=True).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))

    def expired(self, now=None):
        """Past their expiry but not yet marked ended (the sweep's work)."""
        return self.filter(removed_at__isnull=True, expires_at__lte=now or timezone.now())

    def ports(self) -> list[int]:
        """The distinct ports of these rows, sorted (a session's host keeps its live ones served)."""
        return sorted(set(self.values_list("port", flat=True)))


class Preview(models.Model):
    class Access(models.TextChoices):
        ANYONE = "anyone", "anyone with the URL"
        MEMBERS = "members", "workspace members only"

    class Reason(models.TextChoices):
        UNPREVIEW = "unpreview", "taken down by the agent (unpreview)"
        TAKEN_DOWN = "taken_down", "taken down by a person"
        SESSION_STOPPED = "session_stopped", "its session was stopped"
        HOST_DELETED = "host_deleted", "its host was deleted"
        EXPIRED = "expired", "expired"

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="previews")
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="previews")
    name = models.CharField(max_length=63, help_text="The DNS label at the start of the URL.")
    port = models.PositiveIntegerField()
    access = models.CharField(max_length=10, choices=Access.choices, default=Access.ANYONE)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: while its session lives.")
    created_at = models.DateTimeField(auto_now_add=True)
    # Who made it, as the audit log names actors ("agent reviewer", "runner 12"): the agent or
    # runner may be gone long before the record is.
    created_by = models.CharField(max_length=200, blank=True, default="")
    removed_at = models.DateTimeField(null=True, blank=True)
    removed_reason = models.CharField(max_length=20, choices=Reason.choices, blank=True, default="")
    removed_by = models.CharField(max_length=200, blank=True, default="")

    objects = PreviewQuerySet.as_manager()

    class Meta:
        constraints = [
            # One live row per name: the proxy's lookup (selectors.preview_route) goes through
            # this index. An expired row keeps its name until the sweep (or a new preview of
            # that name) marks it ended.
            models.UniqueConstraint(fields=["name"], condition=Q(removed_at__isnull=True), name="preview_live_name"),
        ]
        indexes = [models.Index(fields=["session", "removed_at"], name="preview_session_live")]

    def __str__(self) -> str:
        return self.name

    def is_expired(self, now=None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    def is_live(self, now=None) -> bool:
        return self.removed_at is None and not self.is_expired(now)

    @property
    def state(self) -> str:
        if self.removed_at is not None:
            return "ended"
        return "expired" if self.is_expired() else "live"
