"""AuditEvent: one row per decision or operator action, written in the change's own transaction.

Modelled on Zulip's RealmAuditLog: a stable verb, who did it, to what, in which workspace,
when, from where, and a before/after of the fields it changed. Rows are never changed; the
retention sweep (CALVIN_AUDIT_KEEP_DAYS) is the only thing that removes them.
"""

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    class ActorKind(models.TextChoices):
        PERSON = "person"
        AGENT = "agent"
        HOST = "host"
        SYSTEM = "system"

    workspace = models.ForeignKey(
        "workspaces.Workspace", null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    at = models.DateTimeField(default=timezone.now)
    # A stable dotted name: "approval.approve", "session.stop", "member.invite", "secret.set", ...
    verb = models.CharField(max_length=64)
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices, default=ActorKind.SYSTEM)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who it was, as they were named then (the row outlives renames and deletions).
    actor_label = models.CharField(max_length=200, blank=True, default="")
    target_type = models.CharField(max_length=100, blank=True, default="")  # "app_label.model"
    target_id = models.CharField(max_length=64, blank=True, default="")
    target_label = models.CharField(max_length=200, blank=True, default="")
    via = models.CharField(max_length=30, default="system")  # web, admin, slack, calvin-command, cli, api, system
    ip = models.GenericIPAddressField(null=True, blank=True)
    # {field: [before, after]} of what changed; never a secret's value.
    changes = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "-at"], name="audit_workspace_at"),
            models.Index(fields=["verb", "-at"], name="audit_verb_at"),
            models.Index(fields=["at"], name="audit_at"),
        ]

    def __str__(self) -> str:
        return f"{self.verb} by {self.actor_label or self.actor_kind}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValueError("an audit event is never changed once written")
        super().save(*args, **kwargs)
