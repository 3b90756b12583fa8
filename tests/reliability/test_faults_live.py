"""No live update is lost for good: a message committed while its push fails (Redis down, or a
worker SIGKILLed between its commit and its push) still reaches an open thread page, once and
in order, within seconds, with nothing restarted but what the fault killed.

The page here is thread.js's protocol, driven by a websocket client: it applies frames by seq,
and on (re)connect asks for everything after the last seq it applied.
"""

import json
import time
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.reliability.calls import drive
from tests.reliability.experiments import report
from tests.reliability.processes import ROOT, sessions_and_cookie, wait_until

pytestmark = pytest.mark.slow

RECOVERY_S = 30


def session_with_page(stack) -> tuple[dict, str]:
    runners, cookie = sessions_and_cookie(stack, 1)
    return runners[0], cookie


class Page:
    """A thread page's socket: frames applied by seq, once; a closed socket is opened again and
    asks for what follows the last seq applied (thread.js)."""

    def __init__(self, base_url: str, thread_id: int, cookie: str):
        self.url = base_url.replace("http://", "ws://") + f"/ws/threads/{thread_id}/"
        self.origin, self.cookie = base_url, cookie
        self.last = 0
        self.applied: list[int] = []
        self.message_ids: list[int] = []
        self.reconnects = 0
        self.ws = None

    def _open(self) -> bool:
        try:
            self.ws = connect(self.url, origin=self.origin, additional_headers={"Cookie": self.cookie}, open_timeout=5)
        except (OSError, InvalidStatus, TimeoutError):
            self.ws = None
            return False
        self.ws.send(json.dumps({"since": self.last}))
        return True

    def pump(self, seconds: float) -> None:
        """Read what arrives for `seconds`, reopening a closed socket as the page does."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.ws is None:
                if not self._open():
                    time.sleep(0.5)
                    continue
                self.reconnects += 1
            try:
                frame = json.loads(self.ws.recv(timeout=max(0.05, min(0.5, end - time.monotonic()))))
            except TimeoutError:
                continue
            except (ConnectionClosed, OSError):
                self.ws = None
                continue
            seq = frame.get("seq")
            if not isinstance(seq, int) or seq <= self.last:
                continue
            if seq != self.last + 1:  # a gap: ask for exactly what is missing
                self.ws.send(json.dumps({"since": self.last, "until": seq - 1}))
                continue
            self.last = seq
            self.applied.append(seq)
            if frame.get("event") == "message" and isinstance(frame.get("id"), int) and "html" in frame:
                self.message_ids.append(frame["id"])

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()


def thread_message_ids(stack, thread_id: int) -> list[int]:
    rows = stack.query("SELECT id FROM agent_sessions_message WHERE thread_id = %s ORDER BY id", (thread_id,))
    return [row[0] for row in rows]


def thread_seq(stack, thread_id: int) -> int:
    rows = stack.query("SELECT last_seq FROM dashboard_livestream WHERE name = %s", (f"thread:{thread_id}",))
    return rows[0][0] if rows else 0


def page_has_everything(stack, page: Page, thread_id: int) -> bool:
    page.pump(0.5)
    return set(thread_message_ids(stack, thread_id)) <= set(page.message_ids)


def test_messages_committed_while_redis_is_down_reach_the_open_page_once_in_order(stack, capsys):
    web, _worker = stack.gateway(), stack.worker()
    runner, cookie = session_with_page(stack)
    page = Page(web.url, runner["thread_id"], cookie)
    page.pump(1.0)
    assert page.ws is not None, web.output()

    stack.redis.kill()
    # Committed now; their pushes fail (the channel layer's Redis is gone).
    posted = stack.django(
        f"""
        from sessions.models import Session
        from sessions.services import agent_reply_post
        session = Session.objects.get(id={runner["session_id"]})
        for n in range(10):
            agent_reply_post(session=session, text=f"while Redis was down {{n}}")
        result = 10
        """
    )
    assert posted == 10
    page.pump(2.0)
    stack.redis.start()
    back = time.monotonic()
    wait_until(
        lambda: page_has_everything(stack, page, runner["thread_id"]),
        timeout=RECOVERY_S,
        what="every message committed while Redis was down reached the page",
        state=lambda: f"page has {page.message_ids}, thread has {thread_message_ids(stack, runner['thread_id'])}",
    )
    recovered = time.monotonic() - back
    assert page.applied == list(range(1, page.last + 1))  # each seq once, in order, no gap left
    assert len(page.message_ids) == len(set(page.message_ids))

    # And the page is live again for what follows.
    drive(base_url=web.url, runners=[runner], tool="post_card", per_client=3)
    wait_until(lambda: page_has_everything(stack, page, runner["thread_id"]), timeout=RECOVERY_S, what="after")
    page.close()
    report(
        capsys,
        f"live, Redis killed: 10 committed messages reached the page {recovered:.1f} s after Redis "
        f"was back ({page.reconnects} reconnects)",
    )


def test_a_worker_killed_between_its_commit_and_its_push_the_page_gets_the_effect_anyway(stack, capsys):
    web = stack.gateway()
    dying = stack.worker(
        CALVIN_FAULT_DIE_ON_PUSH="1",
        PYTHONPATH=f"{Path(__file__).parent / 'dies_on_push'}:{ROOT}",
    )
    dying.wait_for_log(" ready.")
    runner, cookie = session_with_page(stack)
    page = Page(web.url, runner["thread_id"], cookie)
    page.pump(1.0)
    before = thread_seq(stack, runner["thread_id"])

    outcome = drive(base_url=web.url, runners=[runner], tool="post_card", per_client=1)
    assert len(outcome.succeeded) == 1
    wait_until(lambda: dying.process.poll() is not None, timeout=30, what="the worker died on its first push")
    assert dying.process.returncode == -9
    committed = time.monotonic()
    # The card is committed (the effect ran, "applied" with it) and was never pushed ...
    assert stack.query("SELECT status FROM tools_toolcall")[0][0] == "applied"
    # ... yet the open page gets it from the live log, with no later event to show it the gap.
    wait_until(
        lambda: page_has_everything(stack, page, runner["thread_id"]),
        timeout=RECOVERY_S,
        what="the card whose push died with its worker reached the page",
        state=lambda: f"page {page.message_ids}, thread {thread_message_ids(stack, runner['thread_id'])}",
    )
    seen = time.monotonic() - committed
    assert thread_seq(stack, runner["thread_id"]) > before
    assert page.applied == list(range(1, page.last + 1))

    # A worker started again does not apply it twice (the claim says it is applied).
    stack.worker().wait_for_log(" ready.")
    drive(base_url=web.url, runners=[runner], tool="post_card", per_client=1)
    wait_until(lambda: page_has_everything(stack, page, runner["thread_id"]), timeout=RECOVERY_S, what="next card")
    assert len(thread_message_ids(stack, runner["thread_id"])) == 2
    page.close()
    report(capsys, f"live, worker killed between commit and push: the page had the card {seen:.1f} s later")
