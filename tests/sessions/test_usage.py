"""Usage per turn: the host's stream parsed, the report checked at the gateway (hostile values),
recorded on the turn and the day, added up per session, agent, person and workspace (scoped)."""

import json
import logging
from decimal import Decimal

import pytest
from django.utils import timezone

from calvin.audit.export import audit_export_lines
from calvin.audit.models import AuditEvent
from calvin.workspaces.models import DailyUsage, Quota
from calvin.workspaces.spend import spend_month_usd
from sessions.host.stream_json import ClaudeStream, result_usage, usage_added
from sessions.hosts import host_create
from sessions.models import Host, Message, Turn
from sessions.scheduling import turns_claim
from sessions.turns import turn_event, turn_finish
from sessions.usage import MAX_COST, MAX_TOKENS, agent_usage, person_usage, session_usage, usage_clean, workspace_usage
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db

RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "done",
    "session_id": "conv-1",
    "total_cost_usd": 0.0123,
    "usage": {
        "input_tokens": 12,
        "output_tokens": 340,
        "cache_read_input_tokens": 5000,
        "cache_creation_input_tokens": 700,
        "server_tool_use": {"web_search_requests": 0},
    },
}


def test_the_result_line_gives_the_turns_usage_and_cost():
    stream = ClaudeStream()
    stream.feed(json.dumps({"type": "system", "subtype": "init", "session_id": "conv-1"}))
    stream.feed(json.dumps(RESULT))
    assert result_usage(stream.result) == {
        "input_tokens": 12,
        "output_tokens": 340,
        "cache_read_tokens": 5000,
        "cache_creation_tokens": 700,
        "cost_usd": 0.0123,
    }


def test_a_result_without_usage_reports_nothing_and_two_runs_add_up():
    assert result_usage({"type": "result", "result": "x"}) is None
    assert result_usage(None) is None
    assert usage_added({"cost_usd": 0.5, "input_tokens": 3}, {"cost_usd": 0.25, "input_tokens": 4}) == {
        "cost_usd": 0.75,
        "input_tokens": 7,
    }
    assert usage_added(None, {"cost_usd": 1}) == {"cost_usd": 1}


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"cost_usd": "0.50"}, "cost_usd"),
        ({"cost_usd": float("nan")}, "cost_usd"),
        ({"cost_usd": float("inf")}, "cost_usd"),
        ({"cost_usd": -3}, "cost_usd"),
        ({"cost_usd": True}, "cost_usd"),
        ({"input_tokens": -1}, "input_tokens"),
        ({"input_tokens": "12"}, "input_tokens"),
        ({"input_tokens": 1.5}, "input_tokens"),
        ({"output_tokens": False}, "output_tokens"),
        ({"output_tokens": None}, "output_tokens"),
    ],
)
def test_hostile_values_are_refused_never_credited(raw, field):
    usage = usage_clean(raw)
    assert usage.cost_usd is None and usage.tokens == {}
    assert usage.problems and field in usage.problems[0] and "refused" in usage.problems[0]


def test_huge_values_are_clamped_so_they_still_count_against_the_caps():
    usage = usage_clean({"cost_usd": 1e300, "input_tokens": 10**30})
    assert usage_clean({"cost_usd": 10**400}).cost_usd == MAX_COST  # a JSON integer of any size
    assert usage.cost_usd == MAX_COST and usage.tokens == {"input_tokens": MAX_TOKENS}
    assert [p.split(":")[0] for p in usage.problems] == ["input_tokens clamped", "cost_usd clamped"]


def test_a_report_that_is_not_an_object_is_refused():
    assert usage_clean(["cost_usd", 5]).problems == ["usage is not an object (list)"]
    assert usage_clean(None).problems == []


@pytest.fixture
def host():
    host, _ = host_create(name="h")
    Host.objects.filter(id=host.id).update(channel_name="h-channel", capacity=4, last_heartbeat_at=timezone.now())
    return host


def run_turn(host, session, text="go", **finish):
    say(session, text)
    [message] = turns_claim(host_id=host.id)
    assert turn_finish(host_id=host.id, turn_id=message["turn"], status="done", reply="ok", **finish)
    return Turn.objects.get(id=message["turn"])


def test_a_claude_code_turns_usage_is_recorded_on_the_turn_and_the_days_spend(host, workspace):
    session = new_session(workspace)
    turn = run_turn(
        host,
        session,
        usage={
            "input_tokens": 12,
            "output_tokens": 340,
            "cache_read_tokens": 5000,
            "cache_creation_tokens": 700,
            "cost_usd": 0.0123,
        },
    )
    assert (turn.input_tokens, turn.output_tokens, turn.cache_read_tokens, turn.cache_creation_tokens) == (
        12,
        340,
        5000,
        700,
    )
    assert turn.cost_usd == Decimal("0.012300")
    assert DailyUsage.objects.get(workspace=workspace).cost_usd == Decimal("0.012300")
    totals = session_usage(session_id=session.id)
    assert totals["all"]["cost_usd"] == Decimal("0.012300") and totals["month"]["tokens"] == 6052
    assert totals["all"]["turns"] == 1
    # And in the audit log (so in its export), as the system's record of the turn.
    event = AuditEvent.objects.get(verb="turn.usage", workspace_id=workspace.id)
    assert event.changes["cost_usd"][1] == "0.012300" and event.changes["output_tokens"][1] == 340
    lines = [json.loads(line) for line in audit_export_lines(AuditEvent.objects.filter(id=event.id), format="jsonl")]
    assert lines[0]["verb"] == "turn.usage" and "0.012300" in json.dumps(lines[0])


def test_a_turn_that_reports_nothing_records_its_minutes_only(host, workspace):
    session = new_session(workspace)
    turn = run_turn(host, session)
    assert turn.cost_usd is None and turn.input_tokens == 0
    assert turn.agent_seconds >= 0
    assert session_usage(session_id=session.id)["all"]["cost_usd"] is None


def test_a_hostile_report_is_logged_and_the_turn_still_ends(host, workspace, caplog):
    session = new_session(workspace)
    with caplog.at_level(logging.WARNING, logger="sessions.usage"):
        turn = run_turn(host, session, usage={"cost_usd": -50, "input_tokens": "lots", "output_tokens": 7})
    assert turn.status == Turn.Status.DONE and turn.cost_usd is None
    assert (turn.input_tokens, turn.output_tokens) == (0, 7)
    assert "cost_usd refused" in caplog.text and "input_tokens refused" in caplog.text
    assert spend_month_usd(workspace_id=workspace.id) == 0  # a negative cost never lowers the spend


def test_spend_so_far_counts_once_and_the_final_total_replaces_it(host, workspace):
    session = new_session(workspace)
    say(session, "go")
    [message] = turns_claim(host_id=host.id)
    assert turn_event(host_id=host.id, turn_id=message["turn"], event={"kind": "usage", "usage": {"cost_usd": 0.4}})
    assert spend_month_usd(workspace_id=workspace.id) == Decimal("0.4")
    # A lower total later (a confused host) is no credit.
    turn_event(host_id=host.id, turn_id=message["turn"], event={"kind": "usage", "usage": {"cost_usd": 0.1}})
    turn_finish(host_id=host.id, turn_id=message["turn"], status="done", usage={"cost_usd": 0.5})
    assert spend_month_usd(workspace_id=workspace.id) == Decimal("0.5")
    assert Turn.objects.get(id=message["turn"]).cost_usd == Decimal("0.5")


def test_the_per_session_cap_stops_the_running_turn_and_refuses_the_next(host, workspace):
    Quota.objects.filter(workspace=workspace).update(session_spend_cap_usd=Decimal("1.00"))
    session = new_session(workspace)
    say(session, "go")
    [message] = turns_claim(host_id=host.id)
    assert Decimal(message["provider"]["max_budget_usd"]) == Decimal("1.00")  # the CLI's own bound too
    turn_event(host_id=host.id, turn_id=message["turn"], event={"kind": "usage", "usage": {"cost_usd": 1.2}})
    turn = Turn.objects.get(id=message["turn"])
    assert turn.error == "stopped from the per-session spend cap of $1.00"  # Stop's own path was taken
    turn_finish(host_id=host.id, turn_id=message["turn"], status="stopped", usage={"cost_usd": 1.25})
    say(session, "again")
    assert turns_claim(host_id=host.id) == []
    refused = Turn.objects.filter(session=session).order_by("-id").first()
    assert refused.status == Turn.Status.FAILED and "per-session spend cap of $1.00" in refused.error
    notices = list(
        Message.objects.filter(thread=session.thread, author=Message.Author.SYSTEM).values_list("text", flat=True)
    )
    assert any(n.startswith("Not run: workspace quota reached: the per-session spend cap of $1.00") for n in notices)
    # Another session of the workspace is under its own cap.
    other = new_session(workspace, title="other")
    say(other, "go")
    assert len(turns_claim(host_id=host.id)) == 1


def test_usage_adds_up_per_session_agent_person_and_workspace_and_stays_in_its_workspace(
    host, workspace, other_workspace
):
    first, second = new_session(workspace, "a"), new_session(workspace, "b")
    run_turn(host, first, usage={"cost_usd": 1.0, "output_tokens": 10})
    run_turn(host, second, usage={"cost_usd": 2.0, "output_tokens": 20})
    elsewhere = new_session(other_workspace, "x")
    run_turn(host, elsewhere, usage={"cost_usd": 40.0, "output_tokens": 400})
    assert workspace_usage(workspace_id=workspace.id)["month"]["cost_usd"] == Decimal("3")
    assert workspace_usage(workspace_id=other_workspace.id)["all"]["cost_usd"] == Decimal("40")
    assert agent_usage(agent_id=first.agent_id)["all"]["output_tokens"] == 30  # both sessions' agent
    assert person_usage(member_id=first.owner_id)["all"]["turns"] == 2
    assert spend_month_usd(workspace_id=workspace.id) == Decimal("3")
    assert spend_month_usd(workspace_id=other_workspace.id) == Decimal("40")
