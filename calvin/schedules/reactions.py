"""A run's outcome follows its turn: recorded in the transaction that ended the turn."""

from calvin.events import TurnChanged, records

ENDED = ("done", "failed", "stopped")


@records(TurnChanged)
def task_run_from_turn(event: TurnChanged) -> None:
    if event.status not in ENDED:
        return
    from calvin.schedules.models import TaskRun
    from calvin.schedules.services import task_run_finished
    from sessions.models import Turn

    if not TaskRun.objects.filter(turn_id=event.turn_id, status=TaskRun.Status.RUNNING).exists():
        return
    error = Turn.objects.filter(id=event.turn_id).values_list("error", flat=True).first() or ""
    task_run_finished(turn_id=event.turn_id, status=event.status, error=error)
