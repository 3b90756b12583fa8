"""People's API tokens: made on the dashboard, shown once, kept as a digest."""

from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A person's token for /api/v1/ (and `ncl`), in one workspace, limited by their role
    there: it acts as the member it belongs to, never as more."""

    member = models.ForeignKey("workspaces.Member", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The token's first characters, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    def is_live(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class IdempotentRequest(models.Model):
    """A POST's answer kept under its Idempotency-Key, so a retry gets the same answer and does
    the change once; the key is the caller's own (a token's principal), never shared."""

    principal = models.CharField(max_length=80)
    key = models.CharField(max_length=200)
    request_digest = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["principal", "key"], name="idempotent_request_unique_key")]

    def __str__(self) -> str:
        return f"{self.principal} {self.key}"
