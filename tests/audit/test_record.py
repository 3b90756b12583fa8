import pytest
from django.db import transaction

from calvin.audit.context import audit_origin
from calvin.audit.models import AuditEvent
from calvin.audit.services import audit_record
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_record_names_who_what_where_and_from_where(django_user_model):
    workspace = workspace_create(name="Acme", slug="acme")
    user = django_user_model.objects.create_user("ann@example.com", "ann@example.com", "x")
    member = Member.objects.create(workspace=workspace, user=user, role=Member.Role.OWNER)
    with transaction.atomic(), audit_origin(via="admin", ip="203.0.113.9"):
        event = audit_record(
            verb="member.role_change",
            workspace=workspace,
            actor=member,
            target=member,
            changes={"role": ("member", "owner")},
        )
    event.refresh_from_db()
    assert (event.verb, event.workspace_id, event.actor_user_id, event.actor_label) == (
        "member.role_change",
        workspace.id,
        user.id,
        "ann@example.com",
    )
    assert (event.via, event.ip, event.target_type, event.changes) == (
        "admin",
        "203.0.113.9",
        "workspaces.member",
        {"role": ["member", "owner"]},
    )


def test_a_record_is_refused_outside_a_transaction_and_never_changed():
    with pytest.raises(RuntimeError):
        audit_record(verb="session.stop")
    with transaction.atomic():
        event = audit_record(verb="session.stop")
    event.verb = "something.else"
    with pytest.raises(ValueError):
        event.save()
    assert AuditEvent.objects.get(id=event.id).verb == "session.stop"


def test_a_secret_value_is_never_recorded():
    with transaction.atomic(), pytest.raises(ValueError):
        audit_record(verb="secret.set", changes={"value": ("", "hunter2")})
    assert not AuditEvent.objects.exists()
