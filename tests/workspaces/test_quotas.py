"""Workspace quotas: turns per day, agent minutes per month, concurrent sessions, and the admin."""

import threading
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.urls import reverse

from calvin.workspaces.models import DailyUsage, Member, Quota
from calvin.workspaces.quotas import (
    quota_agent_seconds_add,
    quota_concurrent_refusal,
    quota_concurrent_sessions,
    quota_turn_take,
    quota_usage,
)
from calvin.workspaces.services import workspace_create

pytestmark = pytest.mark.django_db

# 20:48 UTC: 3 h 12 min before the day resets.
EVENING = datetime(2026, 11, 30, 20, 48, tzinfo=UTC)
NEXT_DAY = datetime(2026, 12, 1, 0, 0, 5, tzinfo=UTC)


@pytest.fixture
def other_workspace():
    return workspace_create(name="Globex", slug="globex")


def limit(workspace, **limits) -> None:
    Quota.objects.filter(workspace=workspace).update(**limits)


def usage(workspace, day) -> DailyUsage:
    return DailyUsage.objects.get(workspace=workspace, day=day)


def test_the_turn_after_the_days_last_is_refused_until_the_next_day(workspace):
    limit(workspace, turns_per_day=3)
    assert [quota_turn_take(workspace_id=workspace.id, now=EVENING) for _ in range(3)] == [None] * 3
    assert quota_turn_take(workspace_id=workspace.id, now=EVENING) == (
        "workspace quota reached: 3 turns per day; it resets at 00:00 UTC (in 3 h 12 min)"
    )
    assert usage(workspace, EVENING.date()).turns == 3  # the refused turn was not counted

    assert quota_turn_take(workspace_id=workspace.id, now=NEXT_DAY) is None
    assert usage(workspace, NEXT_DAY.date()).turns == 1


def test_turns_are_refused_once_the_months_agent_minutes_are_used(workspace):
    limit(workspace, agent_minutes_per_month=2)
    # Time on other days of the month counts; time of the month before does not.
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=600, now=datetime(2026, 10, 31, 23, tzinfo=UTC))
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=60, now=datetime(2026, 11, 2, tzinfo=UTC))
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=59.4, now=EVENING)
    assert quota_turn_take(workspace_id=workspace.id, now=EVENING) is None  # 119 s of 120

    quota_agent_seconds_add(workspace_id=workspace.id, seconds=0.6, now=EVENING)  # rounded to 1 s: 120 of 120
    assert usage(workspace, EVENING.date()).agent_seconds == 60
    assert quota_turn_take(workspace_id=workspace.id, now=EVENING) == (
        "workspace quota reached: 2 agent minutes per month; it resets on 1 December 00:00 UTC"
    )
    assert usage(workspace, EVENING.date()).turns == 1

    assert quota_turn_take(workspace_id=workspace.id, now=NEXT_DAY) is None


def test_the_months_quota_is_named_when_both_are_used_up(workspace):
    """It resets last, so it is the one that says when turns run again."""
    limit(workspace, turns_per_day=1, agent_minutes_per_month=1)
    assert quota_turn_take(workspace_id=workspace.id, now=EVENING) is None
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=60, now=EVENING)
    refused = quota_turn_take(workspace_id=workspace.id, now=EVENING)
    assert refused == "workspace quota reached: 1 agent minutes per month; it resets on 1 December 00:00 UTC"


def test_the_reset_time_is_rounded_up_to_whole_minutes():
    workspace = workspace_create(name="Late", slug="late")
    limit(workspace, turns_per_day=0)
    just_before = datetime(2026, 11, 30, 23, 59, 30, tzinfo=UTC)
    assert quota_turn_take(workspace_id=workspace.id, now=just_before).endswith("(in 1 min)")
    two_hours = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
    assert quota_turn_take(workspace_id=workspace.id, now=two_hours).endswith("(in 2 h)")


def test_a_second_workspaces_use_is_its_own(workspace, other_workspace):
    limit(workspace, turns_per_day=1, agent_minutes_per_month=1)
    assert quota_turn_take(workspace_id=workspace.id, now=EVENING) is None
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=60, now=EVENING)
    assert quota_turn_take(workspace_id=workspace.id, now=EVENING) is not None

    assert quota_turn_take(workspace_id=other_workspace.id, now=EVENING) is None
    other = usage(other_workspace, EVENING.date())
    assert (other.turns, other.agent_seconds) == (1, 0)
    assert usage(workspace, EVENING.date()).turns == 1


def test_a_workspace_without_a_quota_row_has_the_defaults(workspace):
    Quota.objects.filter(workspace=workspace).delete()
    assert quota_turn_take(workspace_id=workspace.id, now=EVENING) is None
    assert quota_concurrent_sessions(workspace_id=workspace.id) == 10
    assert quota_usage(workspace_id=workspace.id, now=EVENING)["turns_per_day"] == 2000


def test_concurrent_sessions(workspace):
    limit(workspace, concurrent_sessions=2)
    assert quota_concurrent_sessions(workspace_id=workspace.id) == 2
    assert quota_concurrent_refusal(workspace_id=workspace.id, running=1) is None
    assert quota_concurrent_refusal(workspace_id=workspace.id, running=2) == (
        "workspace quota reached: 2 sessions at once; it frees when one of them finishes"
    )


def test_usage_reports_today_and_the_month_beside_the_limits(workspace):
    limit(workspace, turns_per_day=7, tool_calls_per_day=9, agent_minutes_per_month=11)
    quota_turn_take(workspace_id=workspace.id, now=EVENING)
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=90, now=datetime(2026, 11, 1, tzinfo=UTC))
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=3, now=EVENING)
    DailyUsage.objects.filter(workspace=workspace, day=EVENING.date()).update(tool_calls=4)
    assert quota_usage(workspace_id=workspace.id, now=EVENING) == {
        "day": EVENING.date(),
        "turns": 1,
        "turns_per_day": 7,
        "tool_calls": 4,
        "tool_calls_per_day": 9,
        "month": datetime(2026, 11, 1).date(),
        "agent_seconds": 93,
        "agent_minutes": 1.6,
        "agent_minutes_per_month": 11,
        "concurrent_sessions": 10,
    }


def test_usage_of_a_workspace_that_used_nothing_is_zero(workspace):
    usage = quota_usage(workspace_id=workspace.id, now=EVENING)
    assert (usage["turns"], usage["tool_calls"], usage["agent_seconds"]) == (0, 0, 0)


def test_no_time_is_taken_back(workspace):
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=60, now=EVENING)
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=-30, now=EVENING)  # a clock stepped back
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=0.4, now=EVENING)
    assert usage(workspace, EVENING.date()).agent_seconds == 60


@pytest.mark.django_db(transaction=True)
def test_concurrent_takes_count_every_turn_and_never_pass_the_limit(workspace):
    """Twenty schedulers at once, on the day's first turn (its row made by whoever gets there)."""
    limit(workspace, turns_per_day=5)
    results, start = [], threading.Barrier(20)

    def take():
        try:
            start.wait()
            results.append(quota_turn_take(workspace_id=workspace.id, now=EVENING))
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(None) == 5 and len(results) == 20
    assert usage(workspace, EVENING.date()).turns == 5


# The admin


def test_admin_shows_the_quota_with_todays_and_the_months_use(admin_client, workspace):
    limit(workspace, turns_per_day=7, tool_calls_per_day=9, agent_minutes_per_month=11)
    quota_turn_take(workspace_id=workspace.id)
    quota_turn_take(workspace_id=workspace.id)
    quota_agent_seconds_add(workspace_id=workspace.id, seconds=93)
    quota = Quota.objects.get(workspace=workspace)

    workspace_create(name="Idle", slug="idle")  # no usage row at all
    listing = admin_client.get(reverse("admin:workspaces_quota_changelist")).content.decode()
    assert "2 of 7" in listing and "0 of 9" in listing and "1.6 of 11" in listing
    assert "0 of 2000" in listing and "0 of 10000" in listing and "0.0 of 30000" in listing

    page = admin_client.get(reverse("admin:workspaces_quota_change", args=[quota.id])).content.decode()
    assert "2 of 7" in page and "1.6 of 11" in page

    # Editable: the next turn counts against the new limit.
    form = {
        "concurrent_sessions": 3,
        "turns_per_day": 2,
        "agent_minutes_per_month": 11,
        "tool_calls_per_day": 9,
        "storage_mib": 100,
        "spawn_depth_max": 3,
        "spawn_live_descendants_max": 20,
    }
    response = admin_client.post(reverse("admin:workspaces_quota_change", args=[quota.id]), form)
    assert response.status_code == 302
    assert quota_turn_take(workspace_id=workspace.id).startswith("workspace quota reached: 2 turns per day")

    days = admin_client.get(reverse("admin:workspaces_dailyusage_changelist"))
    assert [(u.workspace_id, u.turns, u.agent_seconds) for u in days.context["cl"].result_list] == [
        (workspace.id, 2, 93)
    ]
    assert '<td class="field-agent_minutes">1.6</td>' in days.content.decode()


def test_daily_usage_is_read_only_in_the_admin(admin_client, workspace):
    quota_turn_take(workspace_id=workspace.id)
    row = DailyUsage.objects.get(workspace=workspace)
    url = reverse("admin:workspaces_dailyusage_change", args=[row.id])
    admin_client.post(url, {"workspace": workspace.id, "day": row.day, "turns": 0, "tool_calls": 0, "agent_seconds": 0})
    assert DailyUsage.objects.get(id=row.id).turns == 1
    assert admin_client.get(reverse("admin:workspaces_dailyusage_add")).status_code == 403


def test_a_workspace_admin_sees_only_their_workspaces_use_and_cannot_change_the_quota(
    client, django_user_model, workspace, other_workspace
):
    staff = django_user_model.objects.create_user("ops", password="pw-ops-123", is_staff=True)
    Member.objects.create(workspace=workspace, user=staff, role=Member.Role.ADMIN)
    quota_turn_take(workspace_id=workspace.id)
    quota_turn_take(workspace_id=other_workspace.id)
    client.force_login(staff)

    quotas = client.get(reverse("admin:workspaces_quota_changelist"))
    assert [q.workspace_id for q in quotas.context["cl"].result_list] == [workspace.id]
    days = client.get(reverse("admin:workspaces_dailyusage_changelist"))
    assert [u.workspace_id for u in days.context["cl"].result_list] == [workspace.id]
    assert "Globex" not in days.content.decode()  # not even in the workspace filter

    own = Quota.objects.get(workspace=workspace)
    page = client.get(reverse("admin:workspaces_quota_change", args=[own.id]))
    assert page.status_code == 200 and "1 of 2000" in page.content.decode()
    client.post(reverse("admin:workspaces_quota_change", args=[own.id]), {"turns_per_day": 1_000_000})
    assert Quota.objects.get(id=own.id).turns_per_day == 2000

    foreign = Quota.objects.get(workspace=other_workspace)
    assert client.get(reverse("admin:workspaces_quota_change", args=[foreign.id])).status_code == 302
    foreign_day = DailyUsage.objects.get(workspace=other_workspace)
    assert client.get(reverse("admin:workspaces_dailyusage_change", args=[foreign_day.id])).status_code == 302


def test_a_plain_member_sees_no_usage(client, django_user_model, workspace):
    staff = django_user_model.objects.create_user("member", password="pw-member-123", is_staff=True)
    Member.objects.create(workspace=workspace, user=staff, role=Member.Role.MEMBER)
    client.force_login(staff)
    # A plain member administers no workspace: the admin sends them to its login page.
    for name in ("admin:workspaces_dailyusage_changelist", "admin:workspaces_quota_changelist"):
        response = client.get(reverse(name))
        assert response.status_code == 302 and response.url.startswith(reverse("admin:login"))
