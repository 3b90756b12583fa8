"""Slack Events API listeners: record the delivery and hand it to Celery, nothing else.

Slack retries an event it did not see acknowledged within 3 seconds, so nothing slow runs
here: one INSERT (de-duplicated on `event_id`) and one publish after its commit. The answer
leaves after the listener (`process_before_response`), so the row exists before Slack sees
the ack. Every bot's messages, Calvin's own included, are recorded: the worker starts nothing
with them and keeps them in their thread's history (calvin.chat.slack.history)."""

import logging
import re

from slack_bolt.response import BoltResponse

from calvin.chat.slack.inbound import TAKEN_EVENTS, slack_event_record
from calvin.chat.slack.request_checks import without_nul

log = logging.getLogger(__name__)


def register(app) -> None:
    for event_type in TAKEN_EVENTS:
        app.event(event_type)(record_event)
    # Any other event the app is subscribed to is acknowledged and forgotten: unmatched, Bolt
    # would answer 404 (Slack retries) and log the payload as "unhandled".
    app.event(re.compile(".*"))(acknowledge_event)
    app.use(answer_app_rate_limited)


def record_event(body, request) -> None:
    event_id = body.get("event_id")
    event = body.get("event")
    if not event_id or not isinstance(event, dict):
        return  # no id to de-duplicate on: not an Events API delivery Calvin can keep once
    slack_event_record(
        event_id=str(event_id)[:64],
        team_id=str(body.get("team_id") or event.get("team") or ""),
        event=without_nul(event),
        retry_num=_retry_num(request),
    )


def acknowledge_event() -> None:
    pass


def answer_app_rate_limited(body, next):
    """Slack says it dropped this team's events for a minute (over 30,000 an hour): noted,
    answered 200 (it is not an event_callback, so no listener would match it)."""
    if isinstance(body, dict) and body.get("type") == "app_rate_limited":
        log.warning("Slack rate-limited the events of team %s", body.get("team_id"))
        return BoltResponse(status=200, body="")
    return next()


def _retry_num(request) -> int:
    values = request.headers.get("x-slack-retry-num") or ["0"]
    try:
        return int(values[0])
    except (TypeError, ValueError):
        return 0
