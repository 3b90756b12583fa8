"""A Slack mention, timed from its arrival at the gateway to the reply's first Web API call.

    .venv/bin/python bench/slack_inbound.py [--events 30]

Starts a gateway (`uvicorn calvin.asgi`, one worker), a Celery worker (solo pool) and one
`manage.py host` daemon (bench/hosts.py's gateway_and_host_start) on a fresh database
`calvin_bench_slack`, Redis db 9 and var/bench-slack; the Slack Web API is the tests' stand-in
(tests/support/slack_standin.py) in this process, so a call's arrival and the event's sending are
read on one clock. The workspace's agent is the `script` provider answering "got: {prompt}".

Timed, one at a time, each after the previous reply arrived (3 warm-up rounds first):
  - signed app_mention in a new channel → the stand-in's first chat.postMessage in its thread
    (a new session each time: thread, session, runner, the host's turn, the outbox);
  - a reply in that bound thread → the next chat.postMessage there (the session is warm; sent
    once the channel's 1-second post pace has passed);
  - the event's HTTP answer (the listener's record + publish), and the 👀 reactions.add;
  - baseline: the same agent on the same host through the web channel, message_post_by_person
    → the agent's reply stored in the thread (what the web page shows).
See bench/README.md.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# hosts.py sets its own environment on import; this bench's replaces it below.
from hosts import bench_environment, gateway_and_host_start, pct, prepare, row, solo_worker_cmd, wait  # noqa: E402
from run import Processes  # noqa: E402

from tests.support.slack_requests import JSON, event_body, mention, message, signed_headers  # noqa: E402
from tests.support.slack_standin import SlackStandIn  # noqa: E402

VAR = ROOT / "var" / "bench-slack"
DB_NAME = "calvin_bench_slack"
REDIS_URL = "redis://127.0.0.1:6379/9"
QUEUE = "calvin-bench-slack"
SECRET = "bench-slack-signing-secret"
TEAM, BOT_TOKEN, BOT_USER, BOT_ID = "T0BENCH", "xoxb-bench-0001", "U0BOT", "B0BOT"
WARMUP = 3
PACE = 1.1  # seconds: CALVIN_SLACK_CHANNEL_PACE_SECONDS (1.0) and a margin


def environment(api_url: str) -> dict:
    return {
        **bench_environment(db_name=DB_NAME, redis_url=REDIS_URL, name=QUEUE, var=VAR, sessions="gateway-sessions"),
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": api_url,
        "SLACK_BOT_TOKEN": "",
    }


def worker_cmd() -> list[str]:
    return solo_worker_cmd(QUEUE, "bench-slack@%h")


class Slack:
    """Sends signed events to the gateway and reads the stand-in's calls, on one monotonic clock."""

    def __init__(self, standin: SlackStandIn, gateway: str):
        self.standin = standin
        self.http = httpx2.Client(base_url=gateway, timeout=10)
        self.seen = 0

    def send(self, event: dict) -> tuple[float, float]:
        """(sent at, answered after ms)."""
        body = event_body(team_id=TEAM, event=event)
        headers = signed_headers(body, SECRET, content_type=JSON)
        t0 = time.monotonic()
        response = self.http.post("/slack/events", content=body.encode(), headers=headers)
        answered = (time.monotonic() - t0) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"the gateway answered {response.status_code}: {response.text[:200]}")
        return t0, answered

    def first_call(self, method: str, **params) -> float:
        """When the first `method` call with these params arrived at the stand-in."""

        def found():
            for call in self.standin.calls_of(method):
                if all(call.params.get(k) == v for k, v in params.items()):
                    return call
            return None

        return wait(found, timeout=60).at

    def person_says(self, channel: str, ts: str, text: str, thread_ts: str | None = None) -> None:
        with self.standin._lock:  # the message the 👀 reaction lands on
            self.standin.channels[channel].append({"type": "message", "ts": ts, "user": "U1", "text": text})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=30)
    args = parser.parse_args()

    standin = SlackStandIn().start()
    standin.add_team(team_id=TEAM, bot_token=BOT_TOKEN, bot_user_id=BOT_USER, bot_id=BOT_ID)
    os.environ.update(environment(standin.api_url))
    prepare(db_name=DB_NAME, redis_url=REDIS_URL, var=VAR)

    import logging

    import django

    django.setup()
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    from calvin.chat.slack.installations import installation_save
    from calvin.workspaces.models import Member
    from calvin.workspaces.services import agent_default_for, workspace_create
    from sessions.hosts import host_create
    from sessions.models import Message
    from sessions.services import message_post_by_person, session_start

    workspace = workspace_create(name="Bench", slug="bench")
    quota = workspace.quota
    quota.turns_per_day = quota.tool_calls_per_day = 10**6
    quota.concurrent_sessions = 1000
    quota.save()
    agent = agent_default_for(workspace)
    agent.provider, agent.provider_script = "script", json.dumps([{"reply": "got: {prompt}"}])
    agent.save(update_fields=["provider", "provider_script"])
    installation_save(workspace=workspace, team_id=TEAM, bot_token=BOT_TOKEN, bot_user_id=BOT_USER, bot_id=BOT_ID)
    host, token = host_create(name="bench-slack-host")

    procs = Processes()
    try:
        procs.start("worker", worker_cmd(), env=os.environ.copy())
        port, daemon = gateway_and_host_start(procs, host=host, token=token, directory=VAR / "host")
        slack = Slack(standin, f"http://127.0.0.1:{port}")
        print(f"gateway :{port}, Celery worker (solo), host daemon pid {daemon.pid}; stand-in {standin.api_url}")

        mention_reply, thread_reply, acks, reactions, web = [], [], [], [], []
        for i in range(args.events + WARMUP):
            channel, root = f"C{i:04d}", f"1700001000.{i:06d}"
            slack.person_says(channel, root, f"<@{BOT_USER}> hello {i}")
            sent, answered = slack.send(mention(user="U1", channel=channel, ts=root, text=f"hello {i}"))
            replied = slack.first_call("chat.postMessage", channel=channel, thread_ts=root)
            reacted = slack.first_call("reactions.add", channel=channel, timestamp=root)
            # Slack takes one post a second per channel and the outbox keeps that pace: let it
            # pass, so the warm row times Calvin, not the pace.
            time.sleep(max(0.0, replied + PACE - time.monotonic()))
            reply_ts = f"1700002000.{i:06d}"
            slack.person_says(channel, reply_ts, f"again {i}", thread_ts=root)
            posts_before = len([c for c in standin.calls_of("chat.postMessage") if c.params.get("channel") == channel])
            sent2, answered2 = slack.send(
                message(user="U1", channel=channel, ts=reply_ts, text=f"again {i}", thread_ts=root)
            )
            replied2 = wait(
                lambda c=channel, n=posts_before: (
                    [x for x in standin.calls_of("chat.postMessage") if x.params.get("channel") == c][n:] or [None]
                )[0],
                timeout=60,
            ).at
            if i >= WARMUP:
                mention_reply.append((replied - sent) * 1000)
                thread_reply.append((replied2 - sent2) * 1000)
                acks += [answered, answered2]
                reactions.append((reacted - sent) * 1000)

        owner = Member.objects.filter(workspace=workspace).first()
        for i in range(args.events + WARMUP):
            session = session_start(workspace=workspace, owner=owner, title=f"web {i}")
            t0 = time.monotonic()
            message_post_by_person(thread=session.thread, member=owner, text=f"hello {i}")
            wait(lambda s=session: Message.objects.filter(thread=s.thread, author="agent").exists(), timeout=60)
            if i >= WARMUP:
                web.append((time.monotonic() - t0) * 1000)

        print(row("Slack mention → reply's chat.postMessage (new session)", mention_reply))
        print(row("Slack reply in its thread → chat.postMessage (warm)", thread_reply))
        print(row("Slack event → 👀 reactions.add", reactions))
        print(row("Slack event → HTTP answer (the ack)", acks))
        print(row("baseline: web message → agent reply stored (new session)", web))
        summary = {
            name: {"p50": pct(values, 0.5), "p99": pct(values, 0.99), "n": len(values)}
            for name, values in {
                "mention_to_post_ms": mention_reply,
                "thread_reply_to_post_ms": thread_reply,
                "event_to_reaction_ms": reactions,
                "ack_ms": acks,
                "web_message_to_reply_ms": web,
            }.items()
        }
        (VAR / "results.json").write_text(json.dumps(summary, indent=2))
    finally:
        procs.stop_all()
        standin.stop()


if __name__ == "__main__":
    main()
