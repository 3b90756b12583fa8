"""The per-runner count when its row is missing (a runner made before the tool existed),
and the workspace's tool calls per day counted in the same statement."""

import asyncio
import re
import threading
import time
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction

from calvin.workspaces.models import DailyUsage, Quota
from sessions.models import RunnerCount
from tests.conftest import text_of, wait_for
from tools.errors import ToolRefused
from tools.limits import tool_call_count_and_insert, tool_call_count_and_insert_orm
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "n"}}}}


def test_a_missing_counter_row_is_created_on_first_use(agent):
    RunnerCount.objects.filter(runner=agent.runner).delete()
    result = agent.call("post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    assert RunnerCount.objects.get(runner=agent.runner, tool="post_card").used == 1


def test_a_full_counter_refuses_without_recreating_it(agent):
    RunnerCount.objects.filter(runner=agent.runner, tool="post_card").update(used=50)
    result = agent.call("post_card", {"spec": CARD})
    assert result.is_error and "limit of 50 cards per runner reached" in text_of(result)
    assert RunnerCount.objects.filter(runner=agent.runner, tool="post_card").count() == 1


# The workspace's tool calls per day, counted in the same statement as the per-runner count.

QUOTA_REFUSAL = "workspace quota reached: {} tool calls per day; it resets at 00:00 UTC (in "


def today_usage(workspace) -> DailyUsage | None:
    return DailyUsage.objects.filter(workspace=workspace, day=datetime.now(UTC).date()).first()


def card(n) -> dict:
    return {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": f"card {n}"}}}}


def test_the_call_after_the_days_last_is_refused_by_the_quota_and_not_recorded(agent, workspace):
    Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=3)
    for n in range(3):
        result = agent.call("post_card", {"spec": card(n)})
        assert not result.is_error, text_of(result)
    refused = agent.call("post_card", {"spec": card(3)})
    assert refused.is_error and QUOTA_REFUSAL.format(3) in text_of(refused)
    assert "per runner" not in text_of(refused)
    assert ToolCall.objects.filter(session=agent.session).count() == 3
    assert today_usage(workspace).tool_calls == 3
    # The runner's slot taken by the refused statement was given back: 3 of its 50 used.
    assert RunnerCount.objects.get(runner=agent.runner, tool="post_card").used == 3


def test_tools_without_a_per_runner_limit_count_against_the_quota_too(agent, workspace):
    Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=1)
    sent = agent.nanoclaw.call("send_message", {"text": "first", "to": "thread"})
    assert not sent.is_error, text_of(sent)
    refused = agent.nanoclaw.call("send_message", {"text": "second", "to": "thread"})
    assert refused.is_error and QUOTA_REFUSAL.format(1) in text_of(refused)
    assert list(ToolCall.objects.filter(session=agent.session).values_list("arguments__text", flat=True)) == ["first"]
    assert today_usage(workspace).tool_calls == 1
    assert not RunnerCount.objects.filter(runner=agent.runner, tool="send_message").exists()  # no count of its own


def test_a_workspace_without_a_quota_row_is_held_to_the_defaults(agent, workspace):
    Quota.objects.filter(workspace=workspace).delete()
    result = agent.call("post_card", {"spec": card(0)})
    assert not result.is_error, text_of(result)
    DailyUsage.objects.filter(workspace=workspace).update(tool_calls=10_000)
    refused = agent.call("post_card", {"spec": card(1)})
    assert refused.is_error and QUOTA_REFUSAL.format(10_000) in text_of(refused)


def test_the_days_first_call_makes_the_usage_row(agent, workspace):
    DailyUsage.objects.filter(workspace=workspace).delete()
    result = agent.call("post_card", {"spec": card(0)})
    assert not result.is_error, text_of(result)
    assert today_usage(workspace).tool_calls == 1


def test_a_runner_at_its_limit_gets_the_per_runner_message_and_the_day_is_not_counted(agent, workspace):
    RunnerCount.objects.filter(runner=agent.runner, tool="post_card").update(used=50)
    DailyUsage.objects.update_or_create(workspace=workspace, day=datetime.now(UTC).date(), defaults={"tool_calls": 7})
    result = agent.call("post_card", {"spec": card(1)})
    assert result.is_error and "limit of 50 cards per runner reached; it resets when the runner restarts" in text_of(
        result
    )
    assert "workspace quota" not in text_of(result)
    assert today_usage(workspace).tool_calls == 7


@pytest.fixture
def agents(make_agent, celery_worker):
    made = [make_agent() for _ in range(4)]
    yield made
    wait_for(lambda: not ToolCall.objects.filter(status__in=["pending", "applying"]).exists(), timeout=30)


def test_concurrent_calls_of_several_runners_record_exactly_the_quota(agents, workspace):
    """20 calls at once from 4 runners, on the day's first call (nobody has its row yet)."""
    Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=5)
    DailyUsage.objects.filter(workspace=workspace).delete()

    async def all_at_once():
        return await asyncio.gather(*(a._call("post_card", {"spec": card(n)}) for a in agents for n in range(5)))

    results = asyncio.run(all_at_once())
    refusals = [text_of(r) for r in results if r.is_error]
    assert len(refusals) == 15 and all(QUOTA_REFUSAL.format(5) in t for t in refusals), refusals
    assert ToolCall.objects.filter(session__workspace=workspace).count() == 5
    assert today_usage(workspace).tool_calls == 5
    used = RunnerCount.objects.filter(runner__in=[a.runner for a in agents], tool="post_card")
    assert sum(used.values_list("used", flat=True)) == 5  # every refused call's slot given back


def test_another_workspaces_calls_are_counted_apart(agent, make_agent, workspace, other_workspace):
    Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=1)
    agent.call("post_card", {"spec": card(0)})
    assert agent.call("post_card", {"spec": card(1)}).is_error

    other = make_agent(other_workspace)
    result = other.call("post_card", {"spec": card(2)})
    assert not result.is_error, text_of(result)
    assert today_usage(other_workspace).tool_calls == 1
    assert today_usage(workspace).tool_calls == 1


# Recorded directly, not over MCP: the ORM form the embedded SQLite uses (here on PostgreSQL: the
# same rules, three statements), and the hot path's one statement.


def orm_record(agent, tool: str = "post_card"):
    row = ToolCall(session_id=agent.session.id, runner_id=agent.runner.id, tool=tool)
    tool_call_count_and_insert_orm(
        row=row, workspace_id=agent.session.workspace_id, runner_id=agent.runner.id, tool=tool
    )
    return row


@pytest.fixture
def recorded_only(make_agent):
    """A runner whose calls are recorded directly (no worker: the rows are not applied)."""
    return make_agent()


def test_the_orm_form_counts_both_and_refuses_with_the_quotas_message(recorded_only, workspace):
    Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=2)
    DailyUsage.objects.filter(workspace=workspace).delete()
    assert orm_record(recorded_only).pk and orm_record(recorded_only, "send_message").pk
    with pytest.raises(ToolRefused, match=re.escape(QUOTA_REFUSAL.format(2))):
        orm_record(recorded_only)
    assert ToolCall.objects.filter(session=recorded_only.session).count() == 2
    assert today_usage(workspace).tool_calls == 2
    assert RunnerCount.objects.get(runner=recorded_only.runner, tool="post_card").used == 1


def test_the_orm_form_gives_the_per_runner_message(recorded_only, workspace):
    RunnerCount.objects.filter(runner=recorded_only.runner, tool="post_card").update(used=50)
    with pytest.raises(ToolRefused, match="limit of 50 cards per runner reached"):
        orm_record(recorded_only)
    assert not ToolCall.objects.filter(session=recorded_only.session).exists()
    assert today_usage(workspace) is None or today_usage(workspace).tool_calls == 0


def test_a_counted_call_is_one_statement(recorded_only, django_assert_num_queries):
    """The hot path's one round trip, with or without a per-runner limit, once the day's row exists."""
    orm_record(recorded_only)  # makes the day's row
    for tool in ("post_card", "send_message"):
        row = ToolCall(session_id=recorded_only.session.id, runner_id=recorded_only.runner.id, tool=tool)
        with django_assert_num_queries(1):
            tool_call_count_and_insert(
                row=row, workspace_id=recorded_only.session.workspace_id, runner_id=recorded_only.runner.id, tool=tool
            )
        assert row.pk is not None
    assert today_usage(recorded_only.session.workspace).tool_calls == 3


def count_and_insert(agent, tool: str = "send_message") -> ToolCall:
    row = ToolCall(session_id=agent.session.id, runner_id=agent.runner.id, tool=tool)
    tool_call_count_and_insert(row=row, workspace_id=agent.session.workspace_id, runner_id=agent.runner.id, tool=tool)
    return row


def test_a_workspaces_calls_are_stamped_in_the_order_they_commit(recorded_only, make_agent, other_workspace):
    """A call made while another of its workspace's is not committed yet waits for that commit and
    is stamped after it, id and time: a Slack channel posts a session's calls in this order, and a
    later call must never be visible (and applied, and posted) while an earlier one is not.
    Another workspace's call does not wait."""
    elsewhere_agent = make_agent(other_workspace)
    orm_record(recorded_only)  # the days' usage rows
    orm_record(elsewhere_agent)
    done: dict[str, tuple[float, ToolCall]] = {}

    def call_from(agent, key):
        try:
            row = count_and_insert(agent)
            done[key] = (time.monotonic(), row)
        finally:
            connection.close()

    same = threading.Thread(target=call_from, args=(recorded_only, "same"))
    elsewhere = threading.Thread(target=call_from, args=(elsewhere_agent, "elsewhere"))
    with transaction.atomic():
        first = count_and_insert(recorded_only)
        same.start()
        elsewhere.start()
        elsewhere.join(10)
        assert "elsewhere" in done  # not held by this workspace's open call
        time.sleep(0.3)
        assert "same" not in done  # held until the first call commits
        with connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            committing_at = cursor.fetchone()[0]
        committed = time.monotonic()
    same.join(10)
    finished, second = done["same"]
    assert finished >= committed
    assert second.pk > first.pk
    assert second.created_at > committing_at > first.created_at  # stamped once its turn came
    stored = dict(ToolCall.objects.filter(id__in=[first.pk, second.pk]).values_list("id", "created_at"))
    assert stored == {first.pk: first.created_at, second.pk: second.created_at}
