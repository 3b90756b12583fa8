"""Slack ids to Calvin rows: a Slack user to a Member of the team's workspace, a Slack
thread to its Thread. Every lookup is scoped to the workspace the team is tied to."""

from django.db import IntegrityError, transaction

from calvin.workspaces.models import Member
from sessions.models import Thread


def member_for_slack_user(*, workspace_id: int, slack_user_id: str, create: bool = True) -> Member | None:
    """The workspace's member with that Slack user id; with `create`, a plain member is made
    on first contact (two events at once make one)."""
    if not slack_user_id:
        return None
    member = Member.objects.filter(workspace_id=workspace_id, slack_user_id=slack_user_id).first()
    if member is not None or not create:
        return member
    try:
        with transaction.atomic():
            return Member.objects.create(
                workspace_id=workspace_id, slack_user_id=slack_user_id, role=Member.Role.MEMBER
            )
    except IntegrityError:
        return Member.objects.get(workspace_id=workspace_id, slack_user_id=slack_user_id)


def slack_thread(*, workspace_id: int, channel_id: str, thread_ts: str) -> Thread | None:
    """The Calvin thread bound to the Slack thread whose root is `thread_ts` in `channel_id`."""
    return (
        Thread.objects.filter(
            workspace_id=workspace_id,
            channel_kind=Thread.ChannelKind.SLACK,
            channel_id=channel_id,
            thread_ts=thread_ts,
        )
        .select_related("session")
        .first()
    )
