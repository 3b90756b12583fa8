"""Per-runner counts and the workspace's tool calls per day: taken with conditional
UPDATEs, never read-modify-write."""

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache

from django.db import connection, transaction
from django.db.models import F, Model

from calvin.workspaces.models import DailyUsage, Quota
from calvin.workspaces.quotas import (
    quota_default,
    quota_tool_call_take,
    tool_calls_refusal,
    usage_row_ensure,
    utc_today,
)
from sessions.models import RunnerCount
from tools.errors import ToolRefused

# Seed 000: send_file and post_card 50, read_thread 40, post_thread 20,
# request_secret 10, spawn_thread 8 per runner.
PER_RUNNER = {
    "send_file": 50,
    "post_card": 50,
    "read_thread": 40,
    "post_thread": 20,
    "request_secret": 10,
    "spawn_thread": 8,
}

NOUNS = {"send_file": "files", "post_card": "cards"}
LIVE_ID_KEY = "tool_call_id"  # what a live row written with the call is given: the call's id


def _refusal(tool: str) -> ToolRefused:
    noun = NOUNS.get(tool, "calls")
    return ToolRefused(f"limit of {PER_RUNNER[tool]} {noun} per runner reached; it resets when the runner restarts")


def _runner_count_ensure(runner_id: int, tool: str) -> None:
    RunnerCount.objects.bulk_create([RunnerCount(runner_id=runner_id, tool=tool)], ignore_conflicts=True)


def _take(runner_id: int, tool: str, attempt: Callable[[], bool]) -> None:
    """Run `attempt` (one conditional statement); if it took nothing because the counter
    row is missing (a runner made before the tool existed), create the row and try once more."""
    if attempt():
        return
    _runner_count_ensure(runner_id, tool)
    if attempt():
        return
    raise _refusal(tool)


def runner_refuse_if_spent(*, runner_id: int, tool: str) -> None:
    """A read, not a reservation: lets expensive calls fail before their work.

    The slot itself is still taken atomically when the call is recorded.
    """
    if RunnerCount.objects.filter(runner_id=runner_id, tool=tool, used__gte=PER_RUNNER[tool]).exists():
        raise _refusal(tool)


def runner_take_slot(*, runner_id: int, tool: str) -> None:
    """Count one use of `tool`, or refuse when the runner has used them all.

    Run it inside the caller's transaction, so a call refused later gives its slot back.
    """
    counter = RunnerCount.objects.filter(runner_id=runner_id, tool=tool, used__lt=PER_RUNNER[tool])
    _take(runner_id, tool, lambda: counter.update(used=F("used") + 1) == 1)


@cache
def _count_and_insert_sql(
    model: type[Model], per_runner: bool, notify: bool, live_table: str = "", live: int = 0
) -> tuple[str, tuple, tuple]:
    """The one statement that counts a call and inserts its row, and the fields it inserts.

    The day's count is taken only if the runner's slot was (`EXISTS (SELECT FROM slot)`),
    and the row is inserted only if the day's count was (`FROM today`): a refusal by the
    runner's limit inserts nothing and leaves the workspace's count untouched. PostgreSQL
    runs every data-modifying CTE to completion whatever the INSERT reads, so the opposite
    case (slot taken, day refused) does happen: the statement reports it, and the caller
    gives the slot back. The columns come from the model, so they stay in step with it.
    With `notify`, an inserted row also sends pg_notify on the channel given last (PostgreSQL delivers
    it when the transaction commits, and never for a rollback): the worker's wake-up costs no
    statement of its own (tools/dispatcher.py). With `live` rows, the same statement writes the
    call's live events (calvin/dashboard/live.py), each payload given the new row's id as
    LIVE_ID_KEY: the call and what the console shows of it exist together, in one round trip
    and one commit.

    A workspace's calls are stamped in the order they commit: `today` locks the workspace's row
    of the day until the commit, and the row's id and its `auto_now_add` fields
    (`clock_timestamp()`, the moment it is written, not when the statement or the request
    began) are taken after that (`FROM today`). So a call made while another is committing gets
    both later than that one's. A Slack channel sends its posts in this order
    (calvin/chat/slack/lanes.py): with a stamp taken before the commit, a later call could be
    committed, applied and posted while an earlier one was still invisible to the lane.
    """
    q = connection.ops.quote_name
    every = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    stamped = tuple(f for f in every if getattr(f, "auto_now_add", False))
    fields = tuple(f for f in every if f not in stamped)  # the ones given as parameters
    columns = ", ".join(q(f.column) for f in fields + stamped)
    slot = (
        f"slot AS (UPDATE {q(RunnerCount._meta.db_table)} SET used = used + 1"
        " WHERE runner_id = %s AND tool = %s AND used < %s RETURNING 1), "
    )
    after_slot = " AND EXISTS (SELECT FROM slot)" if per_runner else ""
    today = (
        f"today AS (UPDATE {q(DailyUsage._meta.db_table)} SET tool_calls = tool_calls + 1"
        f" WHERE workspace_id = %s AND {q('day')} = %s"
        f" AND tool_calls < COALESCE((SELECT tool_calls_per_day FROM {q(Quota._meta.db_table)}"
        f" WHERE workspace_id = %s), %s){after_slot} RETURNING 1), "
    )
    values = ", ".join(["%s"] * len(fields) + ["clock_timestamp()"] * len(stamped))
    returned = ", ".join(q(f.column) for f in (model._meta.pk, *stamped))
    insert = (
        f"inserted AS (INSERT INTO {q(model._meta.db_table)} ({columns})"
        f" SELECT {values} FROM today RETURNING {returned})"
    )
    logged = ""
    if live:
        events = ", ".join(["(%s, %s, %s::jsonb)"] * live)
        logged = (
            f", logged AS (INSERT INTO {q(live_table)} (stream, seq, kind, payload, created_at)"
            f" SELECT v.stream, NULL, v.kind, v.payload || jsonb_build_object(%s, inserted.{q(model._meta.pk.column)}),"
            f" clock_timestamp() FROM inserted, (VALUES {events}) AS v (stream, kind, payload))"
        )
    taken = "EXISTS (SELECT FROM slot)" if per_runner else "TRUE"
    notified = ", (SELECT pg_notify(%s, '') FROM inserted)" if notify else ""
    sql = (
        f"WITH {slot if per_runner else ''}{today}{insert}{logged}"
        f" SELECT {taken}{notified}, inserted.* FROM (SELECT) AS one LEFT JOIN inserted ON TRUE"
    )
    return sql, fields, stamped


@transaction.atomic
def tool_call_count_and_insert_orm(
    *, row: Model, workspace_id: int, runner_id: int, tool: str, now: datetime | None = None
) -> None:
    """What tool_call_count_and_insert does, in three statements: for the embedded SQLite."""
    if tool in PER_RUNNER:
        runner_take_slot(runner_id=runner_id, tool=tool)
    refused = quota_tool_call_take(workspace_id=workspace_id, now=now)
    if refused:
        raise ToolRefused(refused)  # the slot taken above goes back with the transaction
    row.save(force_insert=True)


def tool_call_count_and_insert(
    *,
    row: Model,
    workspace_id: int,
    runner_id: int,
    tool: str,
    now: datetime | None = None,
    notify: str = "",
    live: tuple[str, Sequence] | None = None,  # the console's table and rows (calvin.events.RowsPort)
) -> None:
    """Count a call (the runner's slot for `tool` if it has a per-runner limit, and one of
    the workspace's tool calls of the UTC day) and insert `row`, all or nothing, stamped in the
    order the workspace's calls commit (see _count_and_insert_sql).

    On PostgreSQL the hot path is one statement, one round trip, whether the tool has a
    per-runner limit or not. Only a refused call or the day's first call (whose usage
    row is made, and the statement tried once more, as `_take` does) pays for more.
    Elsewhere (the embedded SQLite) it falls back to the ORM in a transaction.
    """
    if connection.vendor != "postgresql":
        tool_call_count_and_insert_orm(row=row, workspace_id=workspace_id, runner_id=runner_id, tool=tool, now=now)
        return
    per_runner = tool in PER_RUNNER
    today = utc_today(now)
    live_table, live_rows = live or ("", ())
    sql, fields, stamped = _count_and_insert_sql(type(row), per_runner, bool(notify), live_table, len(live_rows))
    for field in fields:
        field.pre_save(row, add=True)  # defaults that depend on the row (the database stamps the rest)
    values = [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields]
    params = [
        *([runner_id, tool, PER_RUNNER[tool]] if per_runner else []),
        *[workspace_id, today, workspace_id, quota_default("tool_calls_per_day")],
        *values,
        *([LIVE_ID_KEY] if live_rows else []),
        *[value for stream, kind, payload in live_rows for value in (stream, kind, json.dumps(payload))],
        *([notify] if notify else []),
    ]

    def attempt() -> str | None:
        """None once inserted, else which limit refused it: "runner" or "day"."""
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
        slot_taken, (inserted, *stamps) = found[0], found[-1 - len(stamped) :]
        if inserted is not None:
            row.pk = inserted
            for field, stamp in zip(stamped, stamps, strict=True):
                setattr(row, field.attname, stamp)
            row._state.adding = False
            return None
        if not slot_taken:
            return "runner"
        if per_runner:
            # Given back within this transaction (or, in autocommit, a moment after it was
            # taken): only this runner's own concurrent calls could notice the difference.
            RunnerCount.objects.filter(runner_id=runner_id, tool=tool).update(used=F("used") - 1)
        return "day"

    refused = attempt()
    if refused is None:
        return
    # Either row may be missing: the day's first call, or a runner made before the tool existed.
    usage_row_ensure(workspace_id=workspace_id, day=today)
    if refused == "runner":
        _runner_count_ensure(runner_id, tool)
    refused = attempt()
    if refused is None:
        return
    if refused == "runner":
        raise _refusal(tool)
    raise ToolRefused(tool_calls_refusal(workspace_id=workspace_id, now=now))
