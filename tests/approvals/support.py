"""What approval tests share: a request over real MCP, its card, and presses on it as a logged-in person."""

import threading
import uuid
from contextlib import contextmanager

import pytest
from celery.signals import task_postrun, task_prerun

from approvals.models import PendingApproval
from sessions.models import Message
from tests.conftest import Agent, text_of, wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, csrf_token_in, logged_in

__all__ = ["OWNER_PASSWORD", "logged_in"]


def worker_drain(timeout: float = 30.0) -> None:
    """Return once the worker has run everything queued, including what those tasks queued.

    The solo worker takes one queue in order, so a marker task that has run means all
    queued before it have too; a round in which anything else ran is repeated.
    """
    from approvals.tasks import refresh_approval_card

    marker, started, done = {"id": ""}, [], threading.Event()

    def on_prerun(task_id=None, **_):
        started.append(task_id)

    def on_postrun(task_id=None, **_):
        if task_id == marker["id"]:
            done.set()

    task_prerun.connect(on_prerun, weak=False)
    task_postrun.connect(on_postrun, weak=False)
    try:
        while True:
            started.clear()
            done.clear()
            marker["id"] = str(uuid.uuid4())
            refresh_approval_card.apply_async((0,), task_id=marker["id"])  # no approval 0: does nothing
            assert done.wait(timeout), "the worker did not get to the end of its queue"
            if set(started) <= {marker["id"]}:
                return
    finally:
        task_prerun.disconnect(on_prerun)
        task_postrun.disconnect(on_postrun)


@pytest.fixture(autouse=True)
def _worker_idle_afterwards(request):
    """Card posts and edits follow decisions on their own: let them finish before the
    tables are emptied under them (a flush racing a task's row lock deadlocks)."""
    yield
    if "celery_worker" in request.fixturenames:
        worker_drain()


def requested(agent: Agent, tool: str, arguments: dict) -> PendingApproval:
    """Call a gated tool; it answers at once with the approval's id."""
    result = agent.nanoclaw.call(tool, arguments)
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    assert answer["status"] == "approval-pending" and set(answer) == {"status", "approval_id"}, answer
    return PendingApproval.objects.get(id=answer["approval_id"])


def refused(agent: Agent, tool: str, arguments: dict, *expected: str) -> str:
    result = agent.nanoclaw.call(tool, arguments)
    text = text_of(result)
    assert result.is_error, text
    assert text.strip() != f"Error executing tool {tool}", "a refusal says why, never only the generic text"
    for part in expected:
        assert part in text, text
    assert not PendingApproval.objects.filter(session=agent.session).exists(), "a refused call opens no approval"
    return text


def card_of(approval: PendingApproval) -> Message:
    """The approval's card in the session's thread, once the worker posted it."""
    message_id = wait_for(
        lambda: PendingApproval.objects.get(id=approval.id).card_platform_ids.get("message_id"), timeout=20
    )
    return Message.objects.get(id=message_id)


def card_text(message: Message) -> str:
    """Everything the card's web rendering shows, as text."""
    parts = []
    for item in message.card:
        parts.append(item.get("text", ""))
        for entry in item.get("items", []):
            parts.extend(str(entry.get(key, "")) for key in ("label", "value"))
    return "\n".join(parts)


def card_note(approval: PendingApproval, starts: str) -> str:
    """Wait until the card was edited to a note starting with `starts`; returns the note."""

    def note():
        message = Message.objects.get(id=PendingApproval.objects.get(id=approval.id).card_platform_ids["message_id"])
        notes = [i["text"] for i in message.card if i["kind"] == "note" and i["text"].startswith(starts)]
        return notes[0] if notes else None

    return wait_for(note, timeout=20)


def has_buttons(message: Message) -> bool:
    message.refresh_from_db()
    return any(item["kind"] == "actions" for item in message.card)


def system_messages(agent: Agent) -> list[str]:
    return list(
        Message.objects.filter(thread_id=agent.session.thread_id, kind=Message.Kind.SYSTEM).values_list(
            "text", flat=True
        )
    )


def told(agent: Agent, contains: str) -> str:
    """The system message to the agent that contains `contains`, once it is there."""
    return wait_for(lambda: next((t for t in system_messages(agent) if contains in t), None), timeout=20)


class Presser:
    """A person logged in to the web channel who presses buttons on cards, as thread.js does."""

    def __init__(self, http, thread_id: int):
        self.http = http
        self.thread_id = thread_id
        page = http.get(f"/threads/{thread_id}/")
        self.token = csrf_token_in(page.text) if page.status_code == 200 else http.cookies.get("csrftoken", "")

    def press(self, approval_id: int, value: str = "approve"):
        return self.http.post(
            f"/threads/{self.thread_id}/actions/approval/{approval_id}/",
            data={"value": value},
            headers={"X-CSRFToken": self.token, "Accept": "application/json"},
        )

    def allow(self, approval_id: int, value: str = "allow_session", prefix: str | None = None):
        """A permission prompt's allow button, with the prefix typed into the card's form (as actions.js posts it)."""
        data = {"value": value} if prefix is None else {"value": value, "prefix": prefix}
        return self.http.post(
            f"/threads/{self.thread_id}/approvals/{approval_id}/allow/",
            data=data,
            headers={"X-CSRFToken": self.token, "Accept": "application/json"},
        )


@contextmanager
def pressing(base_url: str, username: str, password: str, thread_id: int):
    with logged_in(base_url, username, password) as http:
        yield Presser(http, thread_id)
