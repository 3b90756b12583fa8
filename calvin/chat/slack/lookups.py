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
            member = Member.objects.create(
                workspace_id=workspace_id, slack_user_id=slack_user_id, role=Member.Role.MEMBER
            )
    except IntegrityError:
        return Member.objects.get(workspace_id=workspace_id, slack_user_id=slack_user_id)
    from calvin.celery import queue_on_commit
    from calvin.chat.slack.inbound_tasks import name_slack_member

    # Cards and the dashboard say who did what by name, not by Slack user id.
    queue_on_commit(name_slack_member, member.id)
    return member


def member_name_fetch(*, member_id: int) -> str:
    """Ask Slack (users.info) for a Slack member's name and keep it, unless one is set already."""
    from calvin.chat.models import SlackInstallation
    from calvin.chat.slack.installations import installation_token
    from calvin.chat.slack.web_api import slack_client, slack_error

    member = Member.objects.filter(id=member_id).exclude(slack_user_id="").first()
    installation = SlackInstallation.objects.filter(workspace_id=member.workspace_id).first() if member else None
    if member is None or installation is None or member.display_name:
        return member.display_name if member else ""
    try:
        user = slack_client(installation_token(installation)).users_info(user=member.slack_user_id)["user"]
    except Exception as exc:
        raise slack_error(exc, doing="users.info") from None
    profile = user.get("profile") or {}
    name = (profile.get("display_name") or profile.get("real_name") or user.get("name") or "").strip()[:200]
    if name:
        Member.objects.filter(id=member.id, display_name="").update(display_name=name)
    return name


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
