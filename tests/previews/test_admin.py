"""Previews in the admin: the list reads as people need it, "Take down" and the access/expiry edit
work for the preview's workspace's owners and admins (audited) and for nobody else."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from calvin.audit.models import AuditEvent
from calvin.previews.models import Preview
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from sessions.services import session_start
from tests.previews.support import preview_of

pytestmark = pytest.mark.django_db(transaction=True)

LIST = reverse("admin:previews_preview_changelist")


@pytest.fixture
def acme_preview(workspace):
    session = session_start(workspace=workspace, owner=Member.objects.get(workspace=workspace), title="Dev server")
    return preview_of(session, "acme-app", port=5173)


@pytest.fixture
def globex_preview(django_user_model):
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    ws = workspace_create(name="Globex", slug="globex", owner_user=user)
    session = session_start(workspace=ws, owner=Member.objects.get(workspace=ws), title="Globex thread")
    return preview_of(session, "globex-app", port=3000)


@pytest.fixture
def owner_client(client, workspace):
    client.force_login(Member.objects.get(workspace=workspace).user)
    return client


def test_the_list_shows_each_preview_with_its_link_and_state(owner_client, acme_preview, globex_preview):
    preview_of(acme_preview.session, "old-app", removed_at=timezone.now(), removed_reason="unpreview")
    page = owner_client.get(LIST).content.decode()
    assert 'href="http://acme-app.preview.localhost:8000/"' in page and "Dev server" in page
    assert "ended: taken down by the agent (unpreview)" in page and ">live<" in page
    assert "globex" not in page.lower()
    live_only = owner_client.get(LIST, {"state": "live"}).context["cl"].result_list
    assert [p.name for p in live_only] == ["acme-app"]


def test_take_down_ends_it_with_an_audit_row(owner_client, acme_preview, globex_preview):
    data = {"action": "take_down", "_selected_action": [acme_preview.id, globex_preview.id], "confirmed": "yes"}
    response = owner_client.post(LIST, data, follow=True)
    assert "acme-app taken down" in response.content.decode()
    acme_preview.refresh_from_db()
    globex_preview.refresh_from_db()
    assert acme_preview.removed_reason == "taken_down" and acme_preview.removed_by == "owner"
    assert globex_preview.removed_at is None  # another tenant's id in the POST changes nothing
    event = AuditEvent.objects.get(verb="preview.remove", target_id=str(acme_preview.id))
    assert (event.actor_label, event.via) == ("owner", "admin")


def test_access_and_expiry_are_edited_through_the_service(owner_client, acme_preview, globex_preview):
    url = reverse("admin:previews_preview_change", args=[acme_preview.id])
    later = timezone.now() + timedelta(hours=2)
    response = owner_client.post(
        url,
        {"access": "members", "expires_at_0": later.strftime("%Y-%m-%d"), "expires_at_1": later.strftime("%H:%M:%S")},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    acme_preview.refresh_from_db()
    assert acme_preview.access == "members" and abs((acme_preview.expires_at - later).total_seconds()) < 2
    event = AuditEvent.objects.get(verb="preview.change", target_id=str(acme_preview.id))
    assert event.changes["access"] == ["anyone", "members"] and event.via == "admin"
    # A time gone by is refused in the form.
    past = timezone.now() - timedelta(hours=1)
    response = owner_client.post(
        url, {"access": "anyone", "expires_at_0": past.strftime("%Y-%m-%d"), "expires_at_1": past.strftime("%H:%M:%S")}
    )
    assert response.status_code == 200 and "An expiry is a time to come" in response.content.decode()
    # Another tenant's preview: not found, unchanged.
    other = reverse("admin:previews_preview_change", args=[globex_preview.id])
    owner_client.post(other, {"access": "members"})
    globex_preview.refresh_from_db()
    assert globex_preview.access == "anyone"


def test_a_plain_member_sees_no_previews_in_the_admin(client, workspace, acme_preview, django_user_model):
    user = django_user_model.objects.create_user("plain", password="pw-plain-123")
    Member.objects.create(workspace=workspace, user=user, role="member")
    client.force_login(user)
    assert client.get(LIST).status_code in (302, 403)
    assert Preview.objects.get(id=acme_preview.id).removed_at is None
