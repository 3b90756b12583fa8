"""GET /api/v1/usage: the workspace's quotas with what was used, and its days; never another's."""

from datetime import timedelta
from decimal import Decimal

import pytest

from calvin.workspaces.models import Agent, DailyUsage, Quota
from calvin.workspaces.quotas import utc_today
from tests.api.conftest import agent_client
from tests.api.test_auth_scope import assert_problem

pytestmark = pytest.mark.django_db(transaction=True)


def used(workspace, day, **counts):
    DailyUsage.objects.create(workspace=workspace, day=day, **counts)


def test_a_person_reads_the_workspaces_meters_and_days_and_nothing_of_another(
    api_url, workspace, other_workspace, person, stranger
):
    today = utc_today()
    used(workspace, today, tool_calls=7, turns=3, agent_seconds=600, cost_usd=Decimal("1.25"))
    used(workspace, today - timedelta(days=2), tool_calls=1, turns=1, agent_seconds=60)
    used(workspace, today - timedelta(days=40), tool_calls=99)  # before the days asked for
    used(other_workspace, today, tool_calls=500, turns=200, agent_seconds=9000, cost_usd=Decimal("80"))
    Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=70, monthly_spend_cap_usd=Decimal("5"))

    body = person.get("/usage").json()
    meters = {m["key"]: m for m in body["meters"]}
    assert (meters["tool_calls_today"]["used"], meters["tool_calls_today"]["limit"]) == (7, 70)
    assert meters["tool_calls_today"]["percent"] == 10 and meters["tool_calls_today"]["resets"] == "00:00 UTC"
    assert meters["turns_today"]["used"] == 3
    assert meters["agent_minutes_month"]["used"] >= 10  # 600 s today (and 60 s if still this month)
    assert (meters["spend_month_usd"]["used"], meters["spend_month_usd"]["limit"]) == (1.25, 5.0)
    assert [d["day"] for d in body["days"]] == [str(today), str(today - timedelta(days=2))]
    assert body["days"][0] == {
        "day": str(today), "tool_calls": 7, "turns": 3, "agent_seconds": 600, "cost_usd": 1.25,
    }  # fmt: skip

    theirs = stranger.get("/usage").json()
    assert {m["key"]: m["used"] for m in theirs["meters"]}["tool_calls_today"] == 500
    assert [d["tool_calls"] for d in theirs["days"]] == [500]
    assert len(person.get("/usage", days=1).json()["days"]) == 1


def test_usage_is_for_people_and_global_agents_not_a_group_scoped_one(api_url, workspace):
    used(workspace, utc_today(), tool_calls=4)
    narrow = agent_client(api_url, workspace, name="narrow")
    body = assert_problem(narrow.get("/usage"), 403, "scope_too_narrow")
    assert "cli_scope global" in body["detail"]
    wide = agent_client(api_url, workspace, scope=Agent.CliScope.GLOBAL, name="wide")
    assert {m["key"]: m["used"] for m in wide.get("/usage").json()["meters"]}["tool_calls_today"] == 4


@pytest.mark.parametrize("days", [0, 367, -1, "NaN", "1e999", "\x00"])
def test_a_days_outside_1_to_366_is_a_problem(api_url, person, days):
    assert_problem(person.get("/usage", days=days), 422, "invalid")
