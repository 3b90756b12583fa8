"""Celery finds the chat tasks here; each lives beside the code it drives."""

from calvin.chat.slack.inbound_tasks import *  # noqa: F401,F403
from calvin.chat.slack.interaction_tasks import *  # noqa: F401,F403
from calvin.chat.slack.outbox_tasks import *  # noqa: F401,F403
