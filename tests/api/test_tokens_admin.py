"""API tokens in the admin: a workspace's owners and admins see and revoke its tokens, and
no other workspace's; the digest is never on the page."""

import pytest
from django.urls import reverse

from calvin.api.models import ApiToken
from calvin.api.tokens import api_token_create
from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Member

pytestmark = pytest.mark.django_db(transaction=True)

LIST = reverse("admin:api_apitoken_changelist")


def test_an_owner_sees_and_revokes_their_workspaces_tokens_only(client, workspace, other_workspace):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    ours, _ = api_token_create(member=owner, name="acme CI")
    theirs, _ = api_token_create(member=Member.objects.get(workspace=other_workspace), name="globex CI")
    client.force_login(owner.user)
    page = client.get(LIST).content.decode()
    assert "acme CI" in page and "globex CI" not in page and ours.digest not in page
    data = {"action": "revoke", "_selected_action": [ours.id, theirs.id], "confirmed": "yes"}
    client.post(LIST, data, follow=True)
    assert ApiToken.objects.get(id=ours.id).revoked_at is not None
    assert ApiToken.objects.get(id=theirs.id).revoked_at is None  # another tenant's id changes nothing
    assert AuditEvent.objects.filter(verb="api_token.revoke", target_id=str(ours.id), via="admin").exists()
    assert client.get(reverse("admin:api_apitoken_change", args=[theirs.id])).status_code in (302, 404)
