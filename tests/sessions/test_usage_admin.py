"""Usage in the admin: the session and agent change pages show this month's and all-time totals,
the Quota list and page the month's spend against its cap, and the caps are edited in the Quota
form (audited); a tenant sees only their workspace's."""

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Member, Quota
from sessions.hosts import host_create
from sessions.models import Host
from sessions.scheduling import turns_claim
from sessions.turns import turn_finish
from tests.dashboard.conftest import other_workspace  # noqa: F401 (a fixture)
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db


def finished_turn(session, **usage):
    host = Host.objects.filter(name="h").first() or host_create(name="h")[0]
    Host.objects.filter(id=host.id).update(channel_name="h-channel", capacity=4, last_heartbeat_at=timezone.now())
    say(session, "go")
    [message] = turns_claim(host_id=host.id)
    turn_finish(host_id=host.id, turn_id=message["turn"], status="done", usage=usage)


@pytest.fixture
def ops(client, django_user_model, workspace):
    staff = django_user_model.objects.create_user("ops", password="pw-ops-123", is_staff=True)
    Member.objects.create(workspace=workspace, user=staff, role=Member.Role.ADMIN)
    client.force_login(staff)
    return client


def test_the_session_and_agent_pages_show_their_totals(ops, workspace, other_workspace):  # noqa: F811
    session = new_session(workspace)
    finished_turn(session, cost_usd=1.25, output_tokens=4321)
    finished_turn(new_session(other_workspace), cost_usd=99.0, output_tokens=1)
    page = ops.get(reverse("admin:agent_sessions_session_change", args=[session.id])).content.decode()
    assert "usage-summary" in page and "$1.25" in page and "4321" in page
    agent = ops.get(reverse("admin:workspaces_agent_change", args=[session.agent_id])).content.decode()
    assert "usage-summary" in agent and "$1.25" in agent and "$99.00" not in agent


def test_the_quota_shows_the_months_spend_and_its_caps_are_edited_there(ops, workspace):
    finished_turn(new_session(workspace), cost_usd=3.5)
    quota = Quota.objects.get(workspace=workspace)
    url = reverse("admin:workspaces_quota_change", args=[quota.id])
    assert "$3.50 (no cap)" in ops.get(url).content.decode()
    form = {
        "concurrent_sessions": 10,
        "turns_per_day": 2000,
        "agent_minutes_per_month": 30000,
        "tool_calls_per_day": 10000,
        "storage_mib": 10240,
        "monthly_spend_cap_usd": "20.00",
        "session_spend_cap_usd": "2.50",
        "spawn_depth_max": 3,
        "spawn_live_descendants_max": 20,
    }
    assert ops.post(url, form).status_code == 302
    quota.refresh_from_db()
    assert (quota.monthly_spend_cap_usd, quota.session_spend_cap_usd) == (Decimal("20.00"), Decimal("2.50"))
    assert AuditEvent.objects.filter(verb="quota.change", workspace_id=workspace.id).exists()
    listing = ops.get(reverse("admin:workspaces_quota_changelist")).content.decode()
    assert "$3.50 of $20.00" in listing
