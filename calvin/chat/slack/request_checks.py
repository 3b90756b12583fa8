"""What Slack's endpoints check before slack-bolt sees a request: the signature first (so a
forged request is a 401 whatever it holds), then the body's shape, so a signed but broken
body is a clear 400 rather than an exception inside Bolt (a 500, which Slack retries)."""

import json
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier

FORM = "application/x-www-form-urlencoded"


def signature_valid(*, secret: str, body: bytes, headers) -> bool:
    lowered = {key.lower(): value for key, value in headers.items()}
    return SignatureVerifier(secret).is_valid_request(body, lowered)


def _event_callback_problem(body: dict) -> str | None:
    if body.get("type") != "event_callback":
        return None
    if not isinstance(body.get("event"), dict):
        return "an event_callback without an event object"
    if not isinstance(body.get("event_id"), str) or not body["event_id"]:
        return "an event_callback without an event_id"
    if not isinstance(body["event"].get("type"), str):
        return "an event without a type"
    return None


def _interaction_problem(payload: dict) -> str | None:
    kind = payload.get("type")
    if kind == "block_actions":
        actions = payload.get("actions")
        if not isinstance(actions, list) or not all(isinstance(a, dict) for a in actions):
            return "block_actions without a list of actions"
    if kind in ("view_submission", "view_closed"):
        view = payload.get("view")
        if not isinstance(view, dict) or not isinstance(view.get("type"), str):
            return f"{kind} without a view and its type"
    for key in ("team", "user", "container", "channel"):
        if key in payload and payload[key] is not None and not isinstance(payload[key], dict):
            return f"{key} is not an object"
    return None


def body_problem(*, body: bytes, content_type: str) -> str | None:
    """Why Calvin cannot take this signed body, or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8"
    if content_type.startswith(FORM):
        fields = parse_qs(text, keep_blank_values=True)
        if "payload" not in fields:
            # A slash command: plain fields Bolt reads as strings.
            return None if "command" in fields else "neither a payload nor a command"
        try:
            payload = json.loads(fields["payload"][0])
        except ValueError:
            return "the payload is not JSON"
        if not isinstance(payload, dict):
            return "the payload is not an object"
        return _interaction_problem(payload)
    try:
        parsed = json.loads(text)
    except ValueError:
        return "the body is not JSON"
    if not isinstance(parsed, dict):
        return "the body is not a JSON object"
    return _event_callback_problem(parsed)


def without_nul(value):
    """`value` with NUL characters taken out of every string: PostgreSQL stores none (text or
    jsonb), and no person typed one."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    return value
