"""Invitations: a workspace's owner or admin asks someone, by email, to join with a role."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from calvin.workspaces.models import Member


class Invitation(models.Model):
    """One invitation to one address. The raw token exists only in the emailed link; the row
    keeps its sha256, so a database read does not hand out working links.

    "Open" means neither accepted nor revoked (an expired one is still open: re-inviting the
    address resends it); at most one open invitation per workspace and address.
    """

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="invitations")
    # Stored lowercased (ASCII only, see invitations.email_normalise).
    email = models.CharField(max_length=254)
    role = models.CharField(max_length=10, choices=Member.Role.choices)
    invited_by = models.ForeignKey(Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    token_digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "email"],
                condition=Q(accepted_at__isnull=True, revoked_at__isnull=True),
                name="invitation_one_open_per_email",
            ),
            models.CheckConstraint(condition=Q(email=models.functions.Lower("email")), name="invitation_email_lower"),
        ]
        indexes = [models.Index(fields=["workspace", "-created_at"], name="invitation_workspace_created")]

    def __str__(self) -> str:
        return f"{self.email} as {self.role}"

    @property
    def is_open(self) -> bool:
        return self.accepted_at is None and self.revoked_at is None

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()
