"""Every Slack Web API client Calvin makes: SLACK_API_URL as its base, a bounded timeout,
and Slack's failures turned into the chat interface's two errors with no token in them."""

from django.conf import settings
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web import WebClient

from calvin.chat.base import ChatPermanentError, ChatTemporaryError
from secrets_vault.redaction import redact_text

# Errors that say "not now" rather than "never" (Slack's own wording).
TEMPORARY_ERRORS = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


def slack_client(token: str | None = None) -> WebClient:
    """A WebClient on SLACK_API_URL. No retry handlers: the caller decides what a 429 costs
    (the outbox waits Retry-After in its channel's lane and serves other channels meanwhile)."""
    client = WebClient(token=token, base_url=settings.SLACK_API_URL, timeout=settings.CALVIN_SLACK_HTTP_TIMEOUT)
    client.retry_handlers = []
    return client


def slack_error(exc: Exception, *, doing: str) -> Exception:
    """The chat interface's error for a failed Web API call, its text free of tokens.

    429 -> ChatTemporaryError with Retry-After; 5xx, timeouts and connection errors ->
    ChatTemporaryError; an answer with "ok": false -> ChatPermanentError naming Slack's error."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        status = getattr(response, "status_code", 200)
        error = (response.data or {}).get("error", "unknown_error") if isinstance(response.data, dict) else ""
        if status == 429:
            retry_after = _seconds((response.headers or {}).get("Retry-After") or _header(response, "retry-after"))
            return ChatTemporaryError(f"Slack rate-limited {doing}", retry_after=retry_after)
        if status >= 500 or error in TEMPORARY_ERRORS:
            return ChatTemporaryError(f"Slack answered {status} {error} to {doing}")
        return ChatPermanentError(redact_text(f"Slack refused {doing}: {error}"))
    if isinstance(exc, SlackRequestError | OSError | TimeoutError):
        return ChatTemporaryError(redact_text(f"Slack could not be reached for {doing}: {type(exc).__name__}"))
    return exc


def _header(response, name: str) -> str | None:
    for key, value in (getattr(response, "headers", None) or {}).items():
        if key.lower() == name:
            return value[0] if isinstance(value, list) else value
    return None


def _seconds(value) -> float:
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError):
        return 1.0
