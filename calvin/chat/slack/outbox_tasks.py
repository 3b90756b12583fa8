"""Celery tasks of Slack's outbox: thin, by id; calvin.chat.slack.outbox decides."""

from celery import shared_task
from django.utils import timezone

from calvin.chat.slack.lanes import slack_lane_drain, slack_lanes_stalled

__all__ = ["drain_slack_lane", "sweep_slack_lanes"]


# acks_late: a worker that dies mid-drain leaves the task to be taken again (and the lease expires).
@shared_task(acks_late=True, ignore_result=True)
def drain_slack_lane(lane_id: int, follow_up: bool = False) -> None:
    slack_lane_drain(lane_id=lane_id, follow_up=follow_up)


@shared_task(ignore_result=True, retry_database_errors=False)  # beat runs it again
def sweep_slack_lanes() -> int:
    """Queue again the drains of lanes whose posts wait with nobody serving them."""
    ids = slack_lanes_stalled(now=timezone.now())
    for lane_id in ids:
        drain_slack_lane.delay(lane_id)
    return len(ids)
