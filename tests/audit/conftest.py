"""Two tenants with audit events, and their owners and admins."""

import pytest
from django.db import transaction

from calvin.audit.models import AuditEvent
from calvin.audit.services import audit_record
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create


def event(*, workspace, verb="session.stop", actor=None, changes=None, at=None, via="web", ip="203.0.113.5"):
    with transaction.atomic():
        recorded = audit_record(verb=verb, workspace=workspace, actor=actor, changes=changes, via=via, ip=ip)
    if at is not None:
        AuditEvent.objects.filter(id=recorded.id).update(at=at)
        recorded.refresh_from_db()
    return recorded


@pytest.fixture
def tenants(django_user_model):
    """Acme (ann its owner, adam its admin, mo a plain member) and Globex (gus its owner)."""
    ann = django_user_model.objects.create_user("ann", password="pw-ann-123")
    gus = django_user_model.objects.create_user("gus", password="pw-gus-123")
    acme = workspace_create(name="Acme", slug="acme", owner_user=ann)
    globex = workspace_create(name="Globex", slug="globex", owner_user=gus)
    adam = django_user_model.objects.create_user("adam", password="pw-adam-123")
    Member.objects.create(workspace=acme, user=adam, role=Member.Role.ADMIN)
    mo = django_user_model.objects.create_user("mo", password="pw-mo-123")
    Member.objects.create(workspace=acme, user=mo, role=Member.Role.MEMBER)
    AuditEvent.objects.all().delete()  # workspace.create and member events of the set-up: not these tests'
    return {"acme": acme, "globex": globex, "ann": ann, "gus": gus, "adam": adam, "mo": mo}
