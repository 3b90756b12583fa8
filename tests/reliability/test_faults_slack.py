"""Slack answering 429 (with Retry-After) and 500 in bursts while agents post to their threads.

The Web API stand-in (tests/support/slack_standin.py) runs in the test process; the stack's
worker posts to it. Counted at the stand-in: every message the clients were told was sent
is in its channel exactly once, and no ToolCall or Slack post is left waiting.
"""

import time
from collections import Counter

import pytest

from tests.reliability.experiments import calls_under_fault, report
from tests.reliability.processes import wait_until
from tests.support.slack_standin import SlackStandIn

pytestmark = pytest.mark.slow

TOKEN = "xoxb-standin-reliability-0001"
CHANNELS = 10


def slack_sessions(stack, count: int) -> list[dict]:
    return stack.django(
        f"""
        import uuid
        from django.contrib.auth import get_user_model
        from calvin.chat.slack.installations import installation_save
        from calvin.workspaces.models import Member, Quota
        from calvin.workspaces.services import workspace_create
        from sessions.services import runner_start, session_start

        tag = uuid.uuid4().hex[:8]
        user = get_user_model().objects.create_user(f"slack-{{tag}}", password=uuid.uuid4().hex)
        workspace = workspace_create(name=f"Slack {{tag}}", slug=f"slack-{{tag}}", owner_user=user)
        Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=1_000_000)
        member = Member.objects.get(workspace=workspace, user=user)
        installation_save(workspace=workspace, team_id="T0REL", bot_token={TOKEN!r}, team_name="Reliability",
                          bot_id="B0REL", bot_user_id="U0REL")
        result = []
        for i in range({count}):
            session = session_start(workspace=workspace, owner=member, title=f"slack {{i}}", channel_kind="slack",
                                    channel_id=f"C0REL{{i}}", thread_ts="1700000000.000001")
            _, token = runner_start(session=session)
            result.append({{"token": token, "session_id": session.id, "thread_id": session.thread_id}})
        """
    )


def waiting_posts(stack) -> int:
    return stack.query("SELECT count(*) FROM chat_slackpost WHERE status IN ('queued', 'sending')")[0][0]


def test_slack_answering_429_and_500_in_bursts(stack, capsys):
    standin = SlackStandIn().start()
    try:
        standin.add_team(team_id="T0REL", bot_token=TOKEN, bot_user_id="U0REL", bot_id="B0REL")
        # Each 500 sends its post's retry looking for it (conversations.replies). Under Slack's read
        # limit for apps outside its Marketplace (one call a minute per team: kept by the stand-in
        # and by Calvin, tests/chat/test_slack_thread_history.py) ten such searches in one team take
        # ten minutes; this test is about chat.postMessage's bursts, so reads are a Marketplace app's.
        standin.read_interval = 0.0
        stack.extra_env.update(
            SLACK_API_URL=standin.api_url, CALVIN_SLACK_CHANNEL_PACE_SECONDS="0", CALVIN_SLACK_READ_INTERVAL_SECONDS="0"
        )
        web = stack.gateway()
        worker = stack.worker()
        stack.beat()
        worker.wait_for_log("ready")
        runners = slack_sessions(stack, CHANNELS)

        def bursts(calls_done) -> float:
            # 500 bursts shorter than a post's attempts (CALVIN_SLACK_POST_ATTEMPTS, 6): the stand-in
            # counts a burst in calls, and one post retried alone could take a longer burst whole and
            # be given up (failed, and the agent and the thread told: tests/chat/test_slack_outbound.py).
            for kind, count in (("429", 15), ("500", 5), ("429", 15), ("500", 5)):
                time.sleep(0.5)
                standin.fail("chat.postMessage", kind, count=count, retry_after=1)
                wait_until(lambda: not any(f["count"] for f in standin.faults), timeout=30, what=f"{kind} burst used")
            return time.monotonic()

        def posted(pattern) -> Counter:
            texts = [m.get("text", "") for i in range(CHANNELS) for m in standin.messages(f"C0REL{i}")]
            return Counter(marker for text in texts for marker in set(pattern.findall(text)))

        seen = calls_under_fault(
            stack,
            web,
            tool="send_message",
            clients=CHANNELS,
            per_client=30,
            fault=bursts,
            runners=runners,
            landed=posted,
        )
        refused = Counter(c.status for c in standin.calls_of("chat.postMessage") if c.status != 200)
        assert refused == {429: 30, 500: 10}, refused
        wait_until(lambda: waiting_posts(stack) == 0, timeout=30, what="no Slack post left waiting")
        report(capsys, seen.line("Slack 429 x30 and 500 x10 in bursts"))
    finally:
        standin.stop()
