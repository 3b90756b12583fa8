"""What tools do once an announced change commits (subscribed from ToolsConfig.ready())."""

from calvin.celery import queue_on_commit
from calvin.events import ApprovalChanged, RunnerStarted, SecretRequestChanged, reacts_to, records
from sessions.models import RunnerCount
from tools.limits import PER_RUNNER
from tools.models import ToolCall
from tools.services.common import effect_announce
from tools.tasks import refresh_secret_request_card


@records(RunnerStarted)
def runner_counters_make(event: RunnerStarted) -> None:
    """Counter rows up front, in the runner's own transaction, so taking a slot is always one
    conditional UPDATE (tools.limits)."""
    RunnerCount.objects.bulk_create([RunnerCount(runner_id=event.runner_id, tool=tool) for tool in PER_RUNNER])


@reacts_to(ApprovalChanged)
def approved_call_queue(event: ApprovalChanged) -> None:
    """An approved call's effect goes to the worker (approvals moved it to pending, in its
    decision's transaction; the worker's claim lets one worker in, whatever is published)."""
    if event.status != "approved" or event.card != "refresh" or not event.tool_call_id:
        return
    if ToolCall.objects.filter(id=event.tool_call_id, status=ToolCall.Status.PENDING).exists():
        effect_announce(event.tool_call_id)


@reacts_to(SecretRequestChanged)
def secret_request_card_queue(event: SecretRequestChanged) -> None:
    """The request_secret card shows it was set (the card is its tool call's)."""
    queue_on_commit(refresh_secret_request_card, event.request_id)
