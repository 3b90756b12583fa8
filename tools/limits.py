"""Per-runner counts: taken with a conditional UPDATE, never read-modify-write."""

from django.db.models import F

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


def runner_take_slot(*, runner_id: int, tool: str) -> None:
    """Count one use of `tool`, or refuse when the runner has used them all.

    Must run inside the caller's transaction, so a refused call later in the service
    gives its slot back by rolling back.
    """
    limit = PER_RUNNER[tool]
    if _take(runner_id, tool, limit):
        return
    # No row yet means first use. Creating it is idempotent under concurrency
    # (the unique constraint decides who inserts); then take again.
    RunnerCount.objects.bulk_create([RunnerCount(runner_id=runner_id, tool=tool)], ignore_conflicts=True)
    if _take(runner_id, tool, limit):
        return
    noun = NOUNS.get(tool, "calls")
    raise ToolRefused(f"limit of {limit} {noun} per runner reached; it resets when the runner restarts")


def _take(runner_id: int, tool: str, limit: int) -> bool:
    return RunnerCount.objects.filter(runner_id=runner_id, tool=tool, used__lt=limit).update(used=F("used") + 1) == 1
