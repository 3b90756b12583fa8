"""Requests as Slack sends them to Calvin: Events API envelopes, interactivity payloads and
slash commands, signed with the signing secret exactly as Slack signs them."""

import itertools
import json
import time
import urllib.parse

from slack_sdk.signature import SignatureVerifier

_event_ids = itertools.count(1)


def signed_headers(body: str, secret: str, *, timestamp: int | None = None, content_type: str) -> dict:
    timestamp = int(time.time()) if timestamp is None else timestamp
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": signature,
    }


def event_body(*, team_id: str, event: dict, event_id: str | None = None, api_app_id: str = "A0STANDIN") -> str:
    """An Events API `event_callback` envelope around `event`."""
    return json.dumps(
        {
            "token": "legacy-verification-token-unused",
            "team_id": team_id,
            "api_app_id": api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{next(_event_ids):08d}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": team_id, "is_bot": True}],
        }
    )


def mention(*, user: str, channel: str, ts: str, text: str, thread_ts: str | None = None, bot_user: str = "U0BOT"):
    event = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{bot_user}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def message(*, user: str, channel: str, ts: str, text: str, thread_ts: str | None = None, channel_type="channel"):
    event = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def interaction_body(payload: dict) -> str:
    """Interactivity arrives form-encoded: payload=<JSON>."""
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def command_body(*, team_id: str, channel_id: str, user_id: str, text: str, command: str = "/calvin") -> str:
    return urllib.parse.urlencode(
        {
            "token": "legacy-verification-token-unused",
            "team_id": team_id,
            "channel_id": channel_id,
            "user_id": user_id,
            "command": command,
            "text": text,
            "response_url": "https://hooks.slack.invalid/commands/1",
            "trigger_id": "1.2.standin",
            "api_app_id": "A0STANDIN",
        }
    )


FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
