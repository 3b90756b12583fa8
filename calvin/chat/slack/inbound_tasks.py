"""Celery tasks for Slack events: thin, by id; the services in calvin.chat.slack.inbound decide."""

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings

from calvin.celery import DATABASE_UNAVAILABLE
from calvin.chat.base import ChatTemporaryError
from calvin.chat.slack.inbound import (
    slack_event_fail,
    slack_event_handle,
    slack_events_prune,
    slack_events_stuck,
    slack_reaction_add,
)

__all__ = ["handle_slack_event", "name_slack_member", "react_to_slack_message", "sweep_slack_events"]

log = logging.getLogger(__name__)

EVENT_ATTEMPTS = 5
# A row still "received" this long after it arrived lost its task (publish failed, worker died).
STUCK_AFTER = timedelta(minutes=2)


@shared_task(bind=True, acks_late=True, max_retries=EVENT_ATTEMPTS)
def handle_slack_event(self, slack_event_id: int) -> str | None:
    try:
        return slack_event_handle(slack_event_id=slack_event_id)
    except DATABASE_UNAVAILABLE:
        raise  # not the event's fault: the task's own backoff outlasts the outage, attempts unspent
    except Exception as exc:
        # The claim rolled back with the work: the row is still "received" for the retry.
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=min(2**self.request.retries, 30)) from None
        slack_event_fail(slack_event_id=slack_event_id, error=exc)
        log.exception("Slack event %s failed after %d attempts", slack_event_id, self.request.retries + 1)
        return None


@shared_task(
    acks_late=True, autoretry_for=(ChatTemporaryError,), retry_backoff=True, retry_backoff_max=30, max_retries=5
)
def react_to_slack_message(team_id: str, channel: str, ts: str) -> bool:
    return slack_reaction_add(team_id=team_id, channel=channel, ts=ts)


@shared_task(retry_database_errors=False)  # beat runs it again
def sweep_slack_events() -> int:
    """Beat: queue again the events whose task was lost (the claim keeps it once); forget old ones."""
    stuck = slack_events_stuck(older_than=STUCK_AFTER)
    for slack_event_id in stuck:
        handle_slack_event.delay(slack_event_id)
    slack_events_prune(older_than=timedelta(days=settings.CALVIN_SLACK_EVENTS_KEEP_DAYS))
    return len(stuck)


@shared_task(
    acks_late=True, autoretry_for=(ChatTemporaryError,), retry_backoff=True, retry_backoff_max=60, max_retries=5
)
def name_slack_member(member_id: int) -> str:
    from calvin.chat.slack.lookups import member_name_fetch

    try:
        return member_name_fetch(member_id=member_id)
    except ChatTemporaryError:
        raise
    except Exception as exc:  # a refused users.info leaves the Slack user id as the name
        log.warning("no name for member %s: %s", member_id, exc)
        return ""
