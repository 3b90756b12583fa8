"""Secret (ciphertext only) and SecretRequest (an agent's request_secret, waiting for a person).

Encryption and decryption live in secrets_vault.crypto; values in the clear only in the
vault's services.
"""

import re

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

# Seed 000's request_secret: an environment variable name, at most 128 characters.
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME = 128
# A value is typed by a person into a form: 64 KiB is room for any key file.
MAX_VALUE_BYTES = 64 * 1024


def validate_secret_name(name: str) -> None:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or len(name) > MAX_NAME:
        raise ValidationError(
            "a secret's name is an environment variable name: a letter or underscore, then letters, digits"
            f" or underscores, at most {MAX_NAME} characters"
        )


class Secret(models.Model):
    class Scope(models.TextChoices):
        WORKSPACE = "workspace"
        AGENT = "agent"
        SESSION = "session"

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="secrets")
    # At most one of these: an agent's secret reaches its sessions; a session's (set through
    # request_secret) only that session; neither: every session of the workspace.
    agent = models.ForeignKey(
        "workspaces.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="secrets"
    )
    session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.CASCADE, related_name="secrets"
    )
    name = models.CharField(max_length=MAX_NAME, validators=[validate_secret_name])
    as_file = models.BooleanField(default=False, help_text="Written to a file; $NAME holds its path.")
    ciphertext = models.BinaryField()
    key_id = models.CharField(max_length=16, help_text="Which SP_STORE_KEY encrypted it.")
    set_by = models.ForeignKey("workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    set_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(agent__isnull=True) | Q(session__isnull=True), name="secret_one_scope"),
            models.UniqueConstraint(
                fields=["session", "name"], condition=Q(session__isnull=False), name="secret_unique_in_session"
            ),
            models.UniqueConstraint(
                fields=["agent", "name"], condition=Q(agent__isnull=False), name="secret_unique_in_agent"
            ),
            models.UniqueConstraint(
                fields=["workspace", "name"],
                condition=Q(session__isnull=True, agent__isnull=True),
                name="secret_unique_in_workspace",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def scope(self) -> str:
        if self.session_id:
            return self.Scope.SESSION
        if self.agent_id:
            return self.Scope.AGENT
        return self.Scope.WORKSPACE

    @property
    def place(self) -> str:
        """Where it applies, for lists: "workspace", "agent main", "session 12"."""
        if self.session_id:
            return f"session {self.session_id}"
        if self.agent_id:
            return f"agent {self.agent.name}"
        return "workspace"


class SecretRequest(models.Model):
    """request_secret's card: waits for a person to type the value into the private form."""

    class Status(models.TextChoices):
        WAITING = "waiting"
        SET = "set"

    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="secret_requests")
    # The recorded call, whose effect posts the card; its id is the request's (the form's URL).
    tool_call = models.OneToOneField(
        "tools.ToolCall", primary_key=True, on_delete=models.CASCADE, related_name="secret_request"
    )
    name = models.CharField(max_length=MAX_NAME)
    reason = models.CharField(max_length=200)
    as_file = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.WAITING)
    requested_at = models.DateTimeField(auto_now_add=True)
    set_by = models.ForeignKey("workspaces.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    set_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One waiting card per name and session: a second request points at the first.
            models.UniqueConstraint(
                fields=["session", "name"], condition=Q(status="waiting"), name="secret_request_one_waiting"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class VaultCanary(models.Model):
    """A known text sealed with the vault's first key when the database first met one: a gateway
    whose SP_STORE_KEY cannot open it (a backup restored without its keys, a wrong key) refuses
    to start (secrets_vault/canary.py) instead of failing every secret later."""

    key_id = models.CharField(max_length=16)
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "vault canary"

    def __str__(self) -> str:
        return f"vault canary (key {self.key_id})"
