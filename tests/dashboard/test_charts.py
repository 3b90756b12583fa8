"""The charts' selectors (aggregated in the database, scoped to one workspace) and their page."""

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from approvals.models import PendingApproval
from calvin.dashboard import chart_selectors as charts
from calvin.workspaces.models import Agent
from sessions.models import Session, Turn
from sessions.services import session_start
from tools.models import ToolCall

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 14, 25, tzinfo=UTC)


@pytest.fixture
def owner_client(client, owner_member):
    client.force_login(owner_member.user)
    return client


@pytest.fixture
def two(workspace, owner_member, other_workspace, stranger_member):
    reviewer = Agent.objects.create(workspace=workspace, name="reviewer")
    acme = session_start(workspace=workspace, owner=owner_member, prompt="Acme", agent=reviewer)
    plain = session_start(workspace=workspace, owner=owner_member, prompt="Acme plain")
    spy = Agent.objects.create(workspace=other_workspace, name="spy")
    globex = session_start(workspace=other_workspace, owner=stranger_member, prompt="Globex", agent=spy)
    Session.objects.filter(id=plain.id).update(agent=None)
    Turn.objects.all().delete()  # session_start's first turns: each test makes its own
    return {"acme": acme, "plain": plain, "globex": globex, "member": owner_member, "stranger": stranger_member}


def calls(session, tool, at, n=1):
    made = ToolCall.objects.bulk_create([ToolCall(session=session, tool=tool) for _ in range(n)])
    ToolCall.objects.filter(id__in=[c.id for c in made]).update(created_at=at)


def turn(session, *, created, finished, seconds=0, cost=None):
    made = Turn.objects.create(session=session, status="done", agent_seconds=seconds, cost_usd=cost)
    Turn.objects.filter(id=made.id).update(created_at=created, finished_at=finished)


def approval(session, *, asked, waited, member, status="approved"):
    made = PendingApproval.objects.create(session=session, kind="post_thread", summary="s", expires_at=asked)
    PendingApproval.objects.filter(id=made.id).update(
        requested_at=asked, decided_at=asked + waited, decided_by=member, status=status
    )


def as_dict(series):
    return {name: dict(points) for name, points in series}


def test_a_bad_period_is_the_default_not_an_error():
    assert charts.period_from("30d").key == "30d"
    assert charts.period_from("1y").key == "7d" and charts.period_from(None, "24h").key == "24h"
    assert charts.period_from("24h'; drop table").key == "7d"


def test_buckets_cover_the_period_up_to_now():
    hours = charts.buckets(charts.PERIODS["24h"], NOW)
    assert len(hours) == 24 and hours[-1] == datetime(2026, 11, 30, 14, tzinfo=UTC)
    days = charts.buckets(charts.PERIODS["30d"], NOW)
    assert len(days) == 30 and days[0] == datetime(2026, 11, 1, tzinfo=UTC) and days[-1].day == 30


def test_tool_calls_per_hour_by_tool_count_this_workspace_only(two):
    calls(two["acme"], "send_file", NOW - timedelta(minutes=10), 3)
    calls(two["plain"], "send_file", NOW - timedelta(minutes=20), 2)
    calls(two["acme"], "read_thread", NOW - timedelta(hours=2), 4)
    calls(two["acme"], "read_thread", NOW - timedelta(hours=30))  # before the 24 h
    calls(two["globex"], "send_file", NOW - timedelta(minutes=5), 50)
    calls(two["globex"], "globex_only", NOW - timedelta(minutes=5), 1)

    series = as_dict(charts.tool_calls_by_tool(two["acme"].workspace, charts.PERIODS["24h"], now=NOW))
    assert list(series) == ["send_file", "read_thread"]  # busiest first
    assert series["send_file"]["14:00"] == 5 and series["read_thread"]["12:00"] == 4
    assert sum(series["send_file"].values()) == 5 and sum(series["read_thread"].values()) == 4
    assert len(series["send_file"]) == 24 and series["send_file"]["13:00"] == 0

    week = as_dict(charts.tool_calls_by_tool(two["acme"].workspace, charts.PERIODS["7d"], now=NOW))
    assert week["read_thread"]["11-30"] == 4 and week["read_thread"]["11-29"] == 1


def test_tools_beyond_the_busiest_eight_share_other(two):
    for i in range(10):
        calls(two["acme"], f"tool_{i}", NOW - timedelta(minutes=1), 20 - i)
    series = charts.tool_calls_by_tool(two["acme"].workspace, charts.PERIODS["24h"], now=NOW)
    names = [name for name, _ in series]
    assert names == [f"tool_{i}" for i in range(8)] + ["other"]
    assert dict(series[-1][1])["14:00"] == 12 + 11


def test_approval_latency_p50_and_p90_per_day_from_peoples_decisions(two):
    day = NOW - timedelta(hours=3)
    for minutes in (1, 2, 3, 4, 10):
        approval(two["acme"], asked=day, waited=timedelta(minutes=minutes), member=two["member"])
    approval(two["acme"], asked=day, waited=timedelta(hours=9), member=two["member"], status="expired")
    approval(two["acme"], asked=day, waited=timedelta(hours=9), member=None)  # the system's, not a person's
    approval(two["globex"], asked=day, waited=timedelta(hours=5), member=two["stranger"])
    approval(two["acme"], asked=NOW - timedelta(days=2), waited=timedelta(seconds=30), member=two["member"])

    series = as_dict(charts.approval_latency(two["acme"].workspace, charts.PERIODS["7d"], now=NOW))
    assert series["p50"]["11-30"] == pytest.approx(180)
    assert series["p90"]["11-30"] == pytest.approx(0.6 * 600 + 0.4 * 240)  # percentile_cont interpolates
    assert series["p50"]["11-28"] == pytest.approx(30)
    assert series["p50"]["11-29"] is None  # no decision that day: a gap, not zero
    # The fallback for SQLite (no percentile_cont) computes the same.
    assert charts._percentile([60, 120, 180, 240, 600], 0.9) == pytest.approx(series["p90"]["11-30"])
    assert charts._percentile([42], 0.5) == 42


def test_agent_minutes_spend_and_turns_per_agent_count_this_workspace_only(two):
    recent = NOW - timedelta(hours=1)
    turn(two["acme"], created=recent, finished=recent, seconds=600, cost=Decimal("1.25"))
    turn(two["acme"], created=recent, finished=recent, seconds=300, cost=None)  # a command agent: minutes only
    turn(two["plain"], created=recent, finished=NOW - timedelta(days=1), seconds=120, cost=Decimal("0.5"))
    turn(two["globex"], created=recent, finished=recent, seconds=9999, cost=Decimal("99"))
    workspace, week = two["acme"].workspace, charts.PERIODS["7d"]

    minutes = as_dict(charts.agent_minutes(workspace, week, now=NOW))["agent minutes"]
    assert minutes["11-30"] == 15 and minutes["11-29"] == 2 and minutes["11-28"] == 0
    usd = as_dict(charts.spend(workspace, week, now=NOW))["spend"]
    assert usd["11-30"] == 1.25 and usd["11-29"] == 0.5
    assert charts.turns_per_agent(workspace, week, now=NOW) == [("turns", [("reviewer", 2), ("no agent", 1)])]


def test_the_charts_page_draws_every_chart_with_its_own_period_picker(owner_client, two):
    calls(two["acme"], "send_file", datetime.now(UTC), 3)
    calls(two["globex"], "globex_tool", datetime.now(UTC), 3)
    page = owner_client.get("/w/acme/charts/").content.decode()
    for key in ("calls", "latency", "minutes", "spend", "turns"):
        assert f'data-live-panel="chart-{key}"' in page
    assert page.count("<svg") == 5 and "<script>" not in page.split("</header>")[1].split("<script")[0]
    assert "Tool calls per hour, last 24 h" in page and "Spend per day, last 7 d" in page
    assert "send_file · " in page and "globex_tool" not in page
    for key in ("latency", "minutes", "spend", "turns"):  # only tool calls happened
        assert "no data" in page.split(f'id="chart-{key}"')[1].split("</svg>")[0], key
    assert "no data" not in page.split('id="chart-calls"')[1].split("</svg>")[0]
    calls_panel = page.split('id="chart-calls"')[1].split("</nav>")[0]
    assert 'href="?calls=7d&amp;latency=7d&amp;minutes=7d&amp;spend=7d&amp;turns=7d"' in calls_panel
    assert re.search(r'data-period="24h" aria-current="page"', calls_panel)

    week = owner_client.get("/w/acme/charts/?calls=7d&spend=30d").content.decode()
    assert "Tool calls per day, last 7 d" in week and "Spend per day, last 30 d" in week
    bad = owner_client.get("/w/acme/charts/?calls=forever&spend=<x>")
    assert bad.status_code == 200 and "Tool calls per hour, last 24 h" in bad.content.decode()


def test_another_workspaces_charts_are_404(owner_client, other_workspace):
    assert owner_client.get("/w/globex/charts/").status_code == 404


def test_charts_need_a_login(client, workspace):
    response = client.get("/w/acme/charts/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_home_links_its_charts(owner_client, workspace):
    assert 'href="/w/acme/charts/"' in owner_client.get("/w/acme/").content.decode()
