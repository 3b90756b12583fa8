"""Quota edits: a workspace's owners and admins set their limits up to the platform's ceiling
(CALVIN_QUOTA_CEILING, the model's defaults where it names none), lower them freely, never
another workspace's; superusers set any value; each change is one quota.change event."""

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from calvin.audit.models import AuditEvent
from calvin.operators import OperatorRefused
from calvin.workspaces.models import Quota
from calvin.workspaces.quota_changes import quota_ceilings, quota_change
from tests.admin.conftest import flat

pytestmark = pytest.mark.django_db


def change_url(workspace) -> str:
    return f"/admin/workspaces/quota/{workspace.quota.id}/change/"


def posted(quota: Quota, **limits) -> dict:
    names = ("concurrent_sessions", "turns_per_day", "agent_minutes_per_month", "tool_calls_per_day", "storage_mib")
    names += ("spawn_depth_max", "spawn_live_descendants_max")
    return {name: limits.get(name, getattr(quota, name)) for name in names}


def test_an_owner_lowers_and_raises_up_to_the_ceiling(owner_client, workspace, settings):
    settings.CALVIN_QUOTA_CEILING = {"concurrent_sessions": 20}
    quota = workspace.quota
    page = flat(owner_client.get(change_url(workspace)))
    assert 'name="concurrent_sessions"' in page  # editable for the owner now
    response = owner_client.post(change_url(workspace), posted(quota, concurrent_sessions=20, turns_per_day=100))
    assert response.status_code == 302, flat(response)[:3000]
    quota.refresh_from_db()
    assert (quota.concurrent_sessions, quota.turns_per_day) == (20, 100)
    event = AuditEvent.objects.get(verb="quota.change")
    assert event.actor_label == "owner" and event.workspace_id == workspace.id
    assert event.changes == {"concurrent_sessions": [10, 20], "turns_per_day": [2000, 100]}


def test_an_owner_cannot_raise_past_the_ceiling(owner_client, workspace, settings):
    settings.CALVIN_QUOTA_CEILING = {"concurrent_sessions": 20}
    quota = workspace.quota
    page = flat(owner_client.post(change_url(workspace), posted(quota, concurrent_sessions=21, storage_mib=10_241)))
    assert page.count("the platform&#x27;s ceiling for your plan") == 2
    assert "at most 20 (the platform" in page and "at most 10,240 (the platform" in page  # the model's default
    quota.refresh_from_db()
    assert (quota.concurrent_sessions, quota.storage_mib) == (10, 10_240)
    assert not AuditEvent.objects.filter(verb="quota.change").exists()


def test_a_limit_a_superuser_set_above_the_ceiling_may_be_lowered_not_raised(owner, workspace):
    Quota.objects.filter(id=workspace.quota.id).update(turns_per_day=9_000)
    quota_change(quota_id=workspace.quota.id, limits={"turns_per_day": 8_000}, actor=owner)
    with pytest.raises(ValidationError, match="at most 2,000"):
        quota_change(quota_id=workspace.quota.id, limits={"turns_per_day": 8_500}, actor=owner)
    assert Quota.objects.get(id=workspace.quota.id).turns_per_day == 8_000


def test_a_superuser_sets_any_value(django_user_model, workspace):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123")
    client = Client()
    client.force_login(root)
    response = client.post(change_url(workspace), posted(workspace.quota, concurrent_sessions=500))
    assert response.status_code == 302
    assert Quota.objects.get(id=workspace.quota.id).concurrent_sessions == 500
    assert AuditEvent.objects.get(verb="quota.change").actor_label == "root"


def test_another_workspaces_quota_and_a_plain_member_are_refused(
    owner_client, other_workspace, plain_member, workspace
):
    assert owner_client.post(
        change_url(other_workspace), posted(other_workspace.quota, turns_per_day=1)
    ).status_code in (
        302,
        403,
        404,
    )
    assert Quota.objects.get(workspace=other_workspace).turns_per_day == 2_000
    with pytest.raises(OperatorRefused):
        quota_change(quota_id=workspace.quota.id, limits={"turns_per_day": 1}, actor=plain_member)
    assert not AuditEvent.objects.filter(verb="quota.change").exists()


def test_hostile_values_are_refused(owner_client, workspace):
    for value in ("-1", "1e9", "99999999999999999999", "5\x00", "ten"):
        page = flat(owner_client.post(change_url(workspace), posted(workspace.quota, concurrent_sessions=value)))
        assert "errornote" in page, value
    assert Quota.objects.get(id=workspace.quota.id).concurrent_sessions == 10


def test_a_ceiling_naming_no_limit_is_a_clear_error(settings):
    settings.CALVIN_QUOTA_CEILING = {"sessions": 5}
    with pytest.raises(ValueError, match="names no quota limit: sessions"):
        quota_ceilings()
