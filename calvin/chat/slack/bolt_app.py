"""The one slack-bolt App behind /slack/events, /slack/interactivity and /slack/commands.

Bolt verifies each request's signature and timestamp before any listener runs. Listeners
are thin: they record what arrived and hand the work to Celery within Slack's 3 seconds
(`process_before_response`: the answer leaves after the listener, so what it recorded is
committed before Slack sees the ack). The bot token comes from the team's installation
(calvin.chat.slack.installations), which also covers one-team mode."""

import logging
from functools import lru_cache

from django.conf import settings
from slack_bolt import App
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

from calvin.chat.slack.web_api import slack_client

log = logging.getLogger(__name__)


class _NoTokenFromEnvironmentNote(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN from the environment itself and, as Calvin gives it a client
    (SLACK_API_URL, no token: installations give each request its own), says it ignores it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


log.addFilter(_NoTokenFromEnvironmentNote())


def _authorize(enterprise_id, team_id, user_id, logger):
    from calvin.chat.slack.installations import bot_for_team

    bot = bot_for_team(team_id) if team_id else None
    if bot is None:
        return None
    return AuthorizeResult(
        enterprise_id=enterprise_id,
        team_id=team_id,
        bot_token=bot.token,
        bot_id=bot.bot_id,
        bot_user_id=bot.bot_user_id,
    )


@lru_cache(maxsize=4)
def _app(signing_secret: str, api_url: str) -> App:
    from calvin.chat.slack.listeners import actions, commands, events

    app = App(
        signing_secret=signing_secret,
        client=slack_client(),
        authorize=_authorize,
        process_before_response=True,
        token_verification_enabled=False,
        # Calvin's own messages reach the worker, which starts nothing with them (any bot's) but
        # keeps them in their thread's history: a file's message is known to Calvin only so.
        ignoring_self_events_enabled=False,
        logger=log,
    )
    events.register(app)
    actions.register(app)
    commands.register(app)
    return app


def bolt_app() -> App:
    """The App for the current settings (tests change SLACK_SIGNING_SECRET and SLACK_API_URL)."""
    return _app(settings.SLACK_SIGNING_SECRET, settings.SLACK_API_URL)
