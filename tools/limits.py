"""Per-runner counts: taken with a conditional UPDATE, never read-modify-write."""

from collections.abc import Callable

from django.db import connection, transaction
from django.db.models import F, Model

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


def _refusal(tool: str) -> ToolRefused:
    noun = NOUNS.get(tool, "calls")
    return ToolRefused(f"limit of {PER_RUNNER[tool]} {noun} per runner reached; it resets when the runner restarts")


def _take(runner_id: int, tool: str, attempt: Callable[[], bool]) -> None:
    """Run `attempt` (one conditional statement); if it took nothing because the counter
    row is missing (a runner made before the tool existed), create the row and try once more."""
    if attempt():
        return
    created = RunnerCount.objects.bulk_create([RunnerCount(runner_id=runner_id, tool=tool)], ignore_conflicts=True)
    if created and attempt():
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


def runner_take_slot_and_insert(*, runner_id: int, tool: str, row: Model) -> None:
    """Take a slot and insert `row` in one statement, so both happen or neither does.

    On PostgreSQL this is one round trip instead of a transaction of three, which the
    issue's latency target needs (bench/). Elsewhere (the embedded SQLite) it falls
    back to the ORM in a transaction. Columns come from the model, so they stay in step.
    """
    if connection.vendor != "postgresql":
        with transaction.atomic():
            runner_take_slot(runner_id=runner_id, tool=tool)
            row.save(force_insert=True)
        return
    fields = [f for f in row._meta.concrete_fields if not f.primary_key]
    for field in fields:
        field.pre_save(row, add=True)  # auto_now_add and friends
    values = [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    sql = (
        f"WITH slot AS (UPDATE {RunnerCount._meta.db_table} SET used = used + 1"
        f" WHERE runner_id = %s AND tool = %s AND used < %s RETURNING 1)"
        f" INSERT INTO {row._meta.db_table} ({columns}) SELECT {', '.join(['%s'] * len(fields))} FROM slot"
        f" RETURNING {row._meta.pk.column}"
    )

    def attempt() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(sql, [runner_id, tool, PER_RUNNER[tool], *values])
            inserted = cursor.fetchone()
        if inserted:
            row.pk = inserted[0]
            row._state.adding = False
        return bool(inserted)

    _take(runner_id, tool, attempt)
