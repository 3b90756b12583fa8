"""What approvals do once an announced change commits (subscribed from ApprovalsConfig.ready())."""

from approvals.tasks import post_approval_card, refresh_approval_card
from calvin.celery import queue_on_commit
from calvin.events import ApprovalChanged, reacts_to


@reacts_to(ApprovalChanged)
def approval_card_queue(event: ApprovalChanged) -> None:
    """Post a new approval's card, or edit it in place after any change (a lost publish is not
    lost work: the sweep posts cards that are missing)."""
    if event.card == "post":
        queue_on_commit(post_approval_card, event.approval_id)
    elif event.card in ("refresh", "stale"):
        queue_on_commit(refresh_approval_card, event.approval_id)
