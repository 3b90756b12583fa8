"""Celery tasks for approvals: thin, by id, idempotent."""

from celery import shared_task
from django.utils import timezone

from approvals.services import approval_card_post, approval_card_refresh, approvals_remind, approvals_sweep
from calvin.chat import ChatTemporaryError


@shared_task(
    acks_late=True, autoretry_for=(ChatTemporaryError,), retry_backoff=True, retry_backoff_max=60, max_retries=8
)
def post_approval_card(approval_id: int) -> None:
    approval_card_post(approval_id=approval_id)


@shared_task(
    acks_late=True, autoretry_for=(ChatTemporaryError,), retry_backoff=True, retry_backoff_max=60, max_retries=8
)
def refresh_approval_card(approval_id: int) -> None:
    approval_card_refresh(approval_id=approval_id)


@shared_task(retry_database_errors=False)  # beat runs it again
def sweep_approvals() -> int:
    """Beat: expire what nobody decided in time, and post cards whose first post was lost."""
    swept = approvals_sweep(now=timezone.now())
    for approval_id in swept["cards_missing"]:
        post_approval_card.delay(approval_id)
    return swept["expired"]


@shared_task(retry_database_errors=False)  # beat runs it again
def remind_approvals() -> int:
    """Beat: remind the people who may decide of approvals waiting past CALVIN_APPROVAL_REMIND_MINUTES."""
    return approvals_remind(now=timezone.now())
