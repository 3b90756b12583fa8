"""Celery tasks for Slack interactivity: a card button's press, and the ephemeral answer
to the person who pressed it. Thin, by id; the bot token is looked up here, never queued."""

import logging

from celery import shared_task

from calvin.chat import ChatPermanentError, ChatTemporaryError

log = logging.getLogger(__name__)

__all__ = ["slack_button_pressed", "slack_ephemeral_send"]


# Not acks_late: a press redelivered after a crash would answer "already decided by you";
# a lost press is pressed again.
@shared_task
def slack_button_pressed(
    team_id: str,
    user_id: str,
    user_team_id: str,
    channel_id: str,
    thread_ts: str,
    action: str,
    target_id: int,
    value: str,
) -> bool:
    from calvin.chat.slack.interactions import Press, slack_button_press

    press = Press(
        team_id=team_id,
        user_id=user_id,
        user_team_id=user_team_id,
        channel_id=channel_id,
        thread_ts=thread_ts,
        action=action,
        target_id=target_id,
        value=value,
    )
    outcome = slack_button_press(press=press)
    slack_ephemeral_send.delay(team_id, channel_id, user_id, thread_ts, outcome.ephemeral)
    return outcome.done


@shared_task(autoretry_for=(ChatTemporaryError,), retry_backoff=True, retry_backoff_max=30, max_retries=4)
def slack_ephemeral_send(team_id: str, channel_id: str, user_id: str, thread_ts: str, text: str) -> bool:
    """chat.postEphemeral: only `user_id` sees it, in the thread it was pressed in."""
    from calvin.chat.slack.installations import bot_for_team
    from calvin.chat.slack.lookups import slack_thread
    from calvin.chat.slack.outbox import secrets_redacted
    from calvin.chat.slack.web_api import slack_client, slack_error

    bot = bot_for_team(team_id)
    if bot is None:
        return False  # uninstalled meanwhile: nobody to answer through
    thread = slack_thread(workspace_id=bot.workspace_id, channel_id=channel_id, thread_ts=thread_ts)
    if thread is not None:
        # It can quote the agent's words (a summary, an option): a secret set since is redacted.
        try:
            text = secrets_redacted(thread=thread, value=text)
        except ChatPermanentError as exc:
            log.warning("an ephemeral answer to %s in %s was not sent: %s", user_id, channel_id, exc)
            return False
    try:
        slack_client(bot.token).chat_postEphemeral(
            channel=channel_id, user=user_id, text=text[:3000], thread_ts=thread_ts or None
        )
    except Exception as exc:
        error = slack_error(exc, doing="chat.postEphemeral")
        if isinstance(error, ChatPermanentError):
            log.warning("an ephemeral answer to %s in %s was refused: %s", user_id, channel_id, error)
            return False
        raise error from exc
    return True
