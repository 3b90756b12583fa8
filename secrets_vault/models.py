"""Secret: ciphertext only. Encryption and decryption live in secrets_vault.crypto."""

from django.db import models
from django.db.models import Q


class Secret(models.Model):
    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="secrets")
    # A secret set through request_secret belongs to its session; none: workspace-wide.
    session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.CASCADE, related_name="secrets"
    )
    name = models.CharField(max_length=128)
    as_file = models.BooleanField(default=False)
    ciphertext = models.BinaryField()
    key_id = models.CharField(max_length=16, help_text="Which SP_STORE_KEY encrypted it.")
    created_by = models.ForeignKey(
        "workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "name"], condition=Q(session__isnull=False), name="secret_unique_in_session"
            ),
            models.UniqueConstraint(
                fields=["workspace", "name"], condition=Q(session__isnull=True), name="secret_unique_in_workspace"
            ),
        ]

    def __str__(self) -> str:
        return self.name
