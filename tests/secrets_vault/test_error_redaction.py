"""A failed tool call's error is stored and told to the agent without the session's secrets:
a chat platform's answer may quote what was sent, and no outbound check has seen it."""

import base64

import pytest

from secrets_vault import redaction
from secrets_vault.models import Secret
from secrets_vault.scanner import SecretScanner
from secrets_vault.services import secret_put, secret_set
from sessions.models import Message
from sessions.services import session_start
from tools.effects import tool_call_fail
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

SESSION_VALUE = "sess10n-value/for+errors"
WORKSPACE_VALUE = "w0rkspace-value-for-errors"
SLACK_TOKEN = "xoxb-1234567890-abcdefghij"


@pytest.fixture
def failing_call(vault, workspace, monkeypatch):
    session = session_start(workspace=workspace, owner=workspace.members.first(), title="errors")
    secret_set(session=session, name="SESSION_TOKEN", value=SESSION_VALUE)
    secret_put(workspace_id=workspace.id, name="ORG_TOKEN", value=WORKSPACE_VALUE)
    # A worker that never decrypted these values: only the session's own secrets can catch them.
    monkeypatch.setattr(redaction, "_values", {})
    monkeypatch.setattr(redaction, "_chars", 0)
    monkeypatch.setattr(redaction, "_version", redaction._version + 1)
    return ToolCall.objects.create(session=session, tool="send_message", server="nanoclaw", status="applying")


def test_a_failed_calls_error_is_stored_and_told_without_the_secrets(failing_call):
    encoded = base64.b64encode(WORKSPACE_VALUE.encode()).decode()
    error = f"Slack refused chat.postMessage: invalid_blocks near {SESSION_VALUE!r} ({encoded}) with {SLACK_TOKEN}"
    tool_call_fail(tool_call_id=failing_call.id, error=error)

    failing_call.refresh_from_db()
    told = Message.objects.get(thread_id=failing_call.session.thread_id, kind=Message.Kind.SYSTEM)
    watch = SecretScanner([("SESSION_TOKEN", SESSION_VALUE), ("ORG_TOKEN", WORKSPACE_VALUE), ("SLACK", SLACK_TOKEN)])
    for stored in (failing_call.error, told.text):
        assert watch.find(stored) is None, stored
        assert "Slack refused chat.postMessage: invalid_blocks near '[redacted]'" in stored, stored
        assert "xoxb-[redacted]" in stored
    assert failing_call.status == ToolCall.Status.FAILED
    assert told.text.startswith(f"send_message (call {failing_call.id}) was not delivered: ")


def test_an_error_that_cannot_be_checked_is_not_kept(failing_call):
    # The workspace secret's key is gone (its row now names a key nobody has): fail closed.
    Secret.objects.filter(session__isnull=True).update(key_id="gone")
    tool_call_fail(tool_call_id=failing_call.id, error=f"Slack refused it: {SESSION_VALUE}")

    failing_call.refresh_from_db()
    assert SESSION_VALUE not in failing_call.error
    assert failing_call.error.startswith("(not shown: it cannot be checked against the session's secrets")
    assert "ORG_TOKEN" in failing_call.error  # which secret is unreadable, never a value
