"""Spend caps: the month's cap refuses new turns (saying which cap and when it resets), owners
are told at 80 % and 100 % once a month, concurrent admissions never reserve past the cap, and
each workspace's spend is its own."""

import threading
from datetime import date
from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Agent, DailyUsage, Quota, SpendNotice
from calvin.workspaces.quota_changes import quota_change
from calvin.workspaces.quotas import month_bounds, utc_today
from calvin.workspaces.spend import spend_admission, spend_month_usd
from calvin.workspaces.spend_notices import spend_notices_send
from sessions.hosts import host_create
from sessions.models import Host, Message, Turn
from sessions.scheduling import turns_claim
from sessions.turns import turn_finish
from tests.dashboard.conftest import other_workspace  # noqa: F401 (a fixture)
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db


def cap(workspace, monthly=None, session=None):
    Quota.objects.filter(workspace=workspace).update(monthly_spend_cap_usd=monthly, session_spend_cap_usd=session)


def spent(workspace, amount, day: date | None = None):
    DailyUsage.objects.update_or_create(
        workspace=workspace, day=day or utc_today(), defaults={"cost_usd": Decimal(amount)}
    )


def live_host(name="h", capacity=20):
    host, _ = host_create(name=name)
    Host.objects.filter(id=host.id).update(
        channel_name=f"{name}-channel", capacity=capacity, last_heartbeat_at=timezone.now()
    )
    return host


def notices(session) -> list[str]:
    return list(
        Message.objects.filter(thread=session.thread, author=Message.Author.SYSTEM).values_list("text", flat=True)
    )


def test_a_workspace_at_its_monthly_cap_runs_no_new_turn_and_the_thread_says_which_cap_and_when(workspace):
    cap(workspace, monthly=Decimal("10.00"))
    spent(workspace, "10.00")
    session = new_session(workspace)
    say(session, "go")
    assert turns_claim(host_id=live_host().id) == []
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.FAILED
    following = month_bounds(utc_today())[1]
    expected = (
        "Not run: workspace quota reached: the monthly spend cap of $10.00 ($10.00 spent this month); "
        f"it resets on {following.day} {following:%B} 00:00 UTC"
    )
    assert expected in notices(session)


def test_under_the_cap_a_turn_runs_with_its_share_as_budget(workspace):
    cap(workspace, monthly=Decimal("10.00"))
    Quota.objects.filter(workspace=workspace).update(concurrent_sessions=4)
    spent(workspace, "6.00")
    session = new_session(workspace)
    say(session, "go")
    [message] = turns_claim(host_id=live_host().id)
    assert Decimal(message["provider"]["max_budget_usd"]) == Decimal("1.00")  # $4 left, 4 sessions at once
    assert Turn.objects.get(id=message["turn"]).budget_usd == Decimal("1.00")


def test_last_months_spend_does_not_count(workspace):
    cap(workspace, monthly=Decimal("10.00"))
    first = month_bounds(utc_today())[0]
    spent(workspace, "50.00", day=date.fromordinal(first.toordinal() - 1))
    assert spend_month_usd(workspace_id=workspace.id) == 0
    session = new_session(workspace)
    say(session, "go")
    assert len(turns_claim(host_id=live_host().id)) == 1


def test_a_second_workspaces_spend_is_not_counted(workspace, other_workspace):  # noqa: F811
    cap(workspace, monthly=Decimal("10.00"))
    spent(other_workspace, "999.00")
    session = new_session(workspace)
    say(session, "go")
    assert len(turns_claim(host_id=live_host().id)) == 1
    assert spend_month_usd(workspace_id=workspace.id) == 0


def test_the_owners_are_told_at_80_percent_once_then_at_100_percent(
    workspace, django_user_model, django_capture_on_commit_callbacks
):
    owner = workspace.members.get(role="owner")
    django_user_model.objects.filter(id=owner.user_id).update(email="owner@example.com")
    cap(workspace, monthly=Decimal("10.00"))
    host = live_host()
    session = new_session(workspace)

    def turn(cost):
        say(session, "go")
        [message] = turns_claim(host_id=host.id)
        # The notices are a reaction to UsageRecorded: they run once the turn's end commits.
        with django_capture_on_commit_callbacks(execute=True):
            turn_finish(host_id=host.id, turn_id=message["turn"], status="done", usage={"cost_usd": cost})

    turn(5.0)  # 50 %: nothing
    assert not SpendNotice.objects.exists()
    turn(3.5)  # 85 %: told
    turn(0.5)  # 90 %: told already
    assert spend_notices_send(workspace_id=workspace.id) == []  # and again: nothing
    assert list(SpendNotice.objects.values_list("threshold", flat=True)) == [80]
    assert [m.to for m in mail.outbox] == [["owner@example.com"]]
    assert "80 % of its monthly spend cap" in mail.outbox[0].subject and "$8.50" in mail.outbox[0].body
    assert AuditEvent.objects.filter(verb="spend.threshold", workspace_id=workspace.id).count() == 1
    spent(workspace, "10.00")
    with django_capture_on_commit_callbacks(execute=True):
        assert spend_notices_send(workspace_id=workspace.id) == [100]
    assert "reached its monthly spend cap" in mail.outbox[1].subject


@pytest.mark.django_db(transaction=True)
def test_two_turns_crossing_80_percent_at_once_tell_the_owners_once(workspace, django_user_model):
    owner = workspace.members.get(role="owner")
    django_user_model.objects.filter(id=owner.user_id).update(email="owner@example.com")
    cap(workspace, monthly=Decimal("10.00"))
    spent(workspace, "9.00")
    results, start = [], threading.Barrier(8)

    def send():
        try:
            start.wait()
            results.append(spend_notices_send(workspace_id=workspace.id))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [[]] * 7 + [[80]]
    assert len(mail.outbox) == 1
    assert AuditEvent.objects.filter(verb="spend.threshold").count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_reserve_more_than_the_cap_leaves(workspace):
    """Eight hosts claim sixteen sessions' turns at once: each admission sees the budgets the
    others reserved (the Quota row's lock), so the budgets of the turns that run add up to at
    most what the month's cap leaves."""
    cap(workspace, monthly=Decimal("10.00"))
    Quota.objects.filter(workspace=workspace).update(concurrent_sessions=16)
    spent(workspace, "6.00")
    sessions = [new_session(workspace, f"s{n}") for n in range(16)]
    for session in sessions:
        say(session, "go")
    hosts = [live_host(f"h{n}", capacity=2) for n in range(8)]
    claimed, start = [], threading.Barrier(len(hosts))

    def claim(host):
        try:
            start.wait()
            claimed.extend(turns_claim(host_id=host.id))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(host,)) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    running = Turn.objects.filter(session__workspace=workspace, status=Turn.Status.RUNNING)
    budgets = [turn.budget_usd for turn in running]
    assert len(claimed) == len(budgets) == 16
    assert all(budget > 0 for budget in budgets)
    assert sum(budgets) <= Decimal("4.00")


@pytest.mark.django_db(transaction=True)
def test_under_a_cap_one_agent_that_cannot_hold_a_budget_runs_at_a_time(workspace):
    cap(workspace, monthly=Decimal("10.00"))
    sessions = [new_session(workspace, f"s{n}") for n in range(6)]
    Agent.objects.filter(workspace=workspace).update(provider=Agent.Provider.SCRIPT, provider_script="[]")
    for session in sessions:
        say(session, "go")
    hosts = [live_host(f"h{n}", capacity=2) for n in range(3)]
    start = threading.Barrier(len(hosts))

    def claim(host):
        try:
            start.wait()
            turns_claim(host_id=host.id)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(host,)) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Turn.objects.filter(session__workspace=workspace, status=Turn.Status.RUNNING).count() == 1
    waiting = Turn.objects.filter(session__workspace=workspace, status=Turn.Status.QUEUED)
    assert waiting.count() == 5
    assert all("cannot stop at a budget" in turn.error for turn in waiting)


def test_admission_reserves_nothing_without_caps_and_waits_when_the_rest_is_reserved(workspace):
    def admit(**kwargs):
        base = {"session_spent": Decimal(0), "reserved": Decimal(0), "free_slots": 2}
        base |= {"budgeted": True, "unbudgeted_running": 0}
        return spend_admission(workspace_id=workspace.id, **(base | kwargs))

    assert admit().budget is None
    cap(workspace, monthly=Decimal("10.00"), session=Decimal("3.00"))
    assert admit().budget == Decimal("3.00")  # the session's cap is less than a half of $10
    assert admit(session_spent=Decimal("2.50")).budget == Decimal("0.50")
    assert "per-session spend cap of $3.00" in admit(session_spent=Decimal("3.00")).refusal
    assert "reserved by the turns running now" in admit(reserved=Decimal("10.00")).wait


def test_caps_are_set_in_the_quota_and_a_tenant_stays_under_a_ceiling(workspace, settings):
    owner = workspace.members.get(role="owner")
    quota = Quota.objects.get(workspace=workspace)
    changes = quota_change(quota_id=quota.id, limits={"monthly_spend_cap_usd": Decimal("50.00")}, actor=owner)
    assert changes == {"monthly_spend_cap_usd": (None, Decimal("50.00"))}
    event = AuditEvent.objects.get(verb="quota.change")
    assert "50.00" in str(event.changes)
    settings.CALVIN_QUOTA_CEILING = {"monthly_spend_cap_usd": 100}
    with pytest.raises(ValidationError, match=r"at most \$100.00"):
        quota_change(quota_id=quota.id, limits={"monthly_spend_cap_usd": Decimal("500")}, actor=owner)
    with pytest.raises(ValidationError, match=r"at most \$100.00"):
        quota_change(quota_id=quota.id, limits={"monthly_spend_cap_usd": None}, actor=owner)  # no cap is past it
    assert quota_change(quota_id=quota.id, limits={"monthly_spend_cap_usd": Decimal("20")}, actor=owner)  # lower
