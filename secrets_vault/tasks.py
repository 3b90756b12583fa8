"""Celery tasks for secret requests: thin, by id, idempotent."""

from celery import shared_task

from calvin.chat import ChatTemporaryError
from secrets_vault.requests import secret_request_card_refresh


@shared_task(
    acks_late=True, autoretry_for=(ChatTemporaryError,), retry_backoff=True, retry_backoff_max=60, max_retries=8
)
def refresh_secret_request_card(request_id: int) -> None:
    secret_request_card_refresh(request_id=request_id)
