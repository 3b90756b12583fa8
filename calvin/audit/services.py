"""Recording audit events. Call `audit_record` inside the transaction of the change it
describes: the row commits with the change or not at all."""

from django.db import transaction

from calvin.audit.context import origin_current
from calvin.audit.models import AuditEvent

# Field names whose values are never written to an audit row, whatever a caller passes.
SECRET_FIELDS = frozenset({"value", "token", "password", "secret", "ciphertext", "bot_token", "token_digest"})


def _actor(actor) -> dict:
    """A Member, a User, an Agent, a Host, or None (the system)."""
    from calvin.workspaces.models import Agent, Member
    from sessions.models import Host

    if actor is None:
        return {"actor_kind": AuditEvent.ActorKind.SYSTEM, "actor_label": "system"}
    if isinstance(actor, Member):
        label = actor.user.get_username() if actor.user_id else str(actor)
        return {"actor_kind": AuditEvent.ActorKind.PERSON, "actor_user_id": actor.user_id, "actor_label": label}
    if isinstance(actor, Agent):
        return {"actor_kind": AuditEvent.ActorKind.AGENT, "actor_label": f"agent {actor.name}"}
    if isinstance(actor, Host):
        return {"actor_kind": AuditEvent.ActorKind.HOST, "actor_label": f"host {actor.name}"}
    if getattr(actor, "is_authenticated", False):  # a User
        return {
            "actor_kind": AuditEvent.ActorKind.PERSON,
            "actor_user_id": actor.pk,
            "actor_label": actor.get_username(),
        }
    raise TypeError(f"an audit actor is a Member, User, Agent, Host or None, not {type(actor).__name__}")


def _changes(changes: dict | None) -> dict:
    safe = {}
    for field, pair in (changes or {}).items():
        if field.lower() in SECRET_FIELDS:
            raise ValueError(f"{field!r} is never written to the audit log")
        before, after = pair
        safe[field] = [before, after]
    return safe


def audit_record(
    *,
    verb: str,
    workspace=None,
    actor=None,
    target=None,
    changes: dict | None = None,
    via: str | None = None,
    ip: str | None = None,
) -> AuditEvent:
    """One AuditEvent. `workspace` is a Workspace or its id; `target` any model instance;
    `changes` {field: (before, after)}; `via` and `ip` default to the request's origin."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record belongs in the transaction of the change it records")
    origin = origin_current()
    workspace_id = getattr(workspace, "pk", workspace)
    fields = {
        "verb": verb,
        "workspace_id": workspace_id,
        "via": via or origin.via,
        "ip": ip if ip is not None else origin.ip,
        "changes": _changes(changes),
        **_actor(actor),
    }
    if target is not None:
        fields |= {
            "target_type": target._meta.label_lower,
            "target_id": str(target.pk),
            "target_label": str(target)[:200],
        }
    return AuditEvent.objects.create(**fields)


FORGET_BATCH = 5000


def audit_events_forget(*, now, keep_days: float, batch: int = FORGET_BATCH) -> int:
    """Delete events older than `keep_days`, `batch` rows per transaction (a year of a busy
    workspace never holds one long lock). Returns how many went."""
    from datetime import timedelta

    cutoff = now - timedelta(days=keep_days)
    forgotten = 0
    while True:
        with transaction.atomic():
            ids = list(
                AuditEvent.objects.filter(at__lt=cutoff).order_by("at", "id").values_list("id", flat=True)[:batch]
            )
            if not ids:
                return forgotten
            forgotten += AuditEvent.objects.filter(id__in=ids).delete()[0]
        if len(ids) < batch:
            return forgotten
