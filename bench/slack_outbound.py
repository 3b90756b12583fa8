"""Slack's outbox, measured: one Celery worker (solo pool) sending to 20 channels against a
stand-in that takes at most one chat.postMessage a second per channel.

    .venv/bin/python bench/slack_outbound.py [--channels 20] [--messages 30] [--steady 20]

A fresh database `calvin_bench_slack_out`, Redis db 10 and var/bench-slack-out; the Slack Web
API is the tests' stand-in (tests/support/slack_standin.py) in this process, with
`channel_pace = 1.0` (a second post within 1 s in a channel is answered 429 Retry-After), so
enqueue times and Slack's arrival times are read on one clock. The worker runs with
CALVIN_SLACK_CHANNEL_PACE_SECONDS=1.0. Messages are Calvin's notices in each channel's Slack
thread (sessions.services.system_notice_post → the outbox), made in this process.

  - burst: `--messages` per channel, all made at once (one commit per round across the
    channels); msgs/s over the delivery window, enqueue → Slack latency (queueing included);
  - steady: each channel gets a message every 1.1 s for `--steady` seconds (about 18 msg/s in
    all, under the channels' ceiling of 20): enqueue → Slack latency without a backlog.
Both check that every channel got exactly its messages, in the order made. See bench/README.md.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# hosts.py sets its own environment on import; this bench's replaces it below.
from hosts import bench_environment, pct, prepare, solo_worker_cmd, wait  # noqa: E402
from run import Processes, machine_info  # noqa: E402

from tests.support.slack_standin import SlackStandIn  # noqa: E402

VAR = ROOT / "var" / "bench-slack-out"
DB_NAME = "calvin_bench_slack_out"
REDIS_URL = "redis://127.0.0.1:6379/10"
QUEUE = "calvin-bench-slack-out"
TEAM, BOT_TOKEN = "T0OUT", "xoxb-bench-out-0001"
ROOT_TS = "1700000000.000001"
PACE = 1.0


def environment(api_url: str) -> dict:
    return {
        **bench_environment(db_name=DB_NAME, redis_url=REDIS_URL, name=QUEUE, var=VAR, sessions="sessions"),
        "SLACK_API_URL": api_url,
        "SLACK_BOT_TOKEN": "",
        "CALVIN_SLACK_CHANNEL_PACE_SECONDS": str(PACE),
    }


def worker_cmd() -> list[str]:
    return solo_worker_cmd(QUEUE, "bench-out@%h")


def ms_row(name: str, values: list[float]) -> str:
    return (
        f"{name:<44} p50 {pct(values, 0.5) * 1000:8.0f} ms   p99 {pct(values, 0.99) * 1000:8.0f} ms   n={len(values)}"
    )


class Run:
    """Messages made in channels, and what the stand-in got, on the stand-in's monotonic clock."""

    def __init__(self, standin: SlackStandIn, threads: dict[str, int]):
        self.standin = standin
        self.threads = threads  # channel -> thread id
        self.made: dict[str, float] = {}  # text -> when its commit returned
        self.expected: dict[str, list[str]] = {channel: [] for channel in threads}

    def make_round(self, label: str) -> None:
        """One message in every channel, one commit."""
        from django.db import transaction

        from sessions.services import system_notice_post

        texts = []
        with transaction.atomic():
            for channel, thread_id in self.threads.items():
                text = f"{channel} {label}"
                system_notice_post(thread_id=thread_id, text=text)
                texts.append((channel, text))
        now = time.monotonic()
        for channel, text in texts:
            self.made[text] = now
            self.expected[channel].append(text)

    def delivered(self) -> int:
        return len([c for c in self.standin.ok_calls_of("chat.postMessage") if c.params.get("text") in self.made])

    def wait_all(self, timeout: float) -> None:
        wait(lambda: self.delivered() >= len(self.made), timeout=timeout)
        time.sleep(1.5)  # anything sent twice would show now

    def check(self) -> list[str]:
        """What went wrong: a channel's messages not exactly the ones made, in order."""
        problems = []
        for channel, expected in self.expected.items():
            got = [m["text"] for m in self.standin.messages(channel) if m["text"] in self.made]
            if got != expected:
                lost = len(set(expected) - set(got))
                twice = len(got) - len(set(got))
                problems.append(f"{channel}: {lost} lost, {twice} duplicated, order {'kept' if not lost else '?'}")
        return problems

    def latencies(self, texts) -> tuple[list[float], list[float]]:
        """(enqueue → Slack seconds per message, Slack arrival times) for these texts."""
        arrived = {c.params["text"]: c.at for c in self.standin.ok_calls_of("chat.postMessage")}
        times = sorted(arrived[t] for t in texts if t in arrived)
        return [arrived[t] - self.made[t] for t in texts if t in arrived], times

    def sustained(self, texts) -> tuple[float, float]:
        """(msg/s summed over the channels, mean seconds between a channel's posts): each
        channel's (posts - 1) / (its last post - its first), so no channel's free first post counts."""
        wanted = set(texts)
        by_channel: dict[str, list[float]] = {}
        for call in self.standin.ok_calls_of("chat.postMessage"):
            if call.params.get("text") in wanted:
                by_channel.setdefault(call.params["channel"], []).append(call.at)
        rates = [(len(t) - 1) / (t[-1] - t[0]) for t in by_channel.values() if len(t) > 1]
        return sum(rates), len(rates) / sum(rates)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--messages", type=int, default=30, help="per channel, in the burst")
    parser.add_argument("--steady", type=float, default=20.0, help="seconds of steady load (0: none)")
    args = parser.parse_args()

    standin = SlackStandIn().start()
    standin.add_team(team_id=TEAM, bot_token=BOT_TOKEN)
    standin.channel_pace = PACE
    os.environ.update(environment(standin.api_url))
    prepare(db_name=DB_NAME, redis_url=REDIS_URL, var=VAR)

    import logging

    import django

    django.setup()
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    from calvin.chat.slack.installations import installation_save
    from calvin.workspaces.models import Member
    from calvin.workspaces.services import workspace_create
    from sessions.services import session_start

    workspace = workspace_create(name="Bench", slug="bench")
    owner = Member.objects.create(workspace=workspace, display_name="bench")
    installation_save(workspace=workspace, team_id=TEAM, bot_token=BOT_TOKEN, bot_user_id="U0BOT", bot_id="B0BOT")
    threads = {}
    for c in range(args.channels):
        channel = f"C{c + 1:04d}"
        session = session_start(
            workspace=workspace, owner=owner, title=channel, channel_kind="slack", channel_id=channel, thread_ts=ROOT_TS
        )
        threads[channel] = session.thread_id

    procs = Processes()
    try:
        procs.start("worker-slack-out", worker_cmd(), env=os.environ.copy())
        run = Run(standin, threads)
        # Warm-up: the worker's first tasks (imports, connections), one message a channel.
        run.make_round("warm-up")
        run.wait_all(timeout=60)
        procs.check("worker-slack-out")
        time.sleep(PACE)

        # Burst.
        burst = []
        for i in range(args.messages):
            run.make_round(f"burst {i}")
            burst += [f"{channel} burst {i}" for channel in threads]
        made_in = max(run.made[t] for t in burst) - min(run.made[t] for t in burst)
        run.wait_all(timeout=args.messages * 3 + 60)
        burst_latency, burst_times = run.latencies(burst)
        window = burst_times[-1] - burst_times[0]
        burst_rate, interval = run.sustained(burst)
        first_made = min(run.made[t] for t in burst)
        overall = len(burst_times) / (burst_times[-1] - first_made)

        # Steady load under the ceiling.
        steady = []
        if args.steady:
            time.sleep(PACE)
            started, i = time.monotonic(), 0
            while time.monotonic() - started < args.steady:
                tick = time.monotonic()
                run.make_round(f"steady {i}")
                steady += [f"{channel} steady {i}" for channel in threads]
                i += 1
                time.sleep(max(0.0, 1.1 - (time.monotonic() - tick)))
            run.wait_all(timeout=60)
        steady_latency, steady_times = run.latencies(steady) if steady else ([], [])

        problems = run.check()
        posts = standin.calls_of("chat.postMessage")
        refused = len([c for c in posts if c.status == 429])
        print(f"{args.channels} channels, stand-in pace {PACE:.1f} s per channel, one Celery worker (solo pool)")
        print(
            f"burst: {len(burst)} messages ({args.messages} per channel) made in {made_in:.2f} s;"
            f" {len(burst_times)} delivered in {window:.1f} s: sustained {burst_rate:.2f} msg/s"
            f" (a channel's posts {interval * 1000:.0f} ms apart on average; ceiling {args.channels / PACE:.0f}),"
            f" {overall:.2f} msg/s from the first made to the last delivered"
        )
        print(ms_row("burst: enqueue → Slack (queueing included)", burst_latency))
        if steady:
            rate = (len(steady_times) - 1) / (steady_times[-1] - steady_times[0])
            print(f"steady: {len(steady)} messages offered at {args.channels / 1.1:.1f} msg/s, delivered at {rate:.2f}")
            print(ms_row("steady: enqueue → Slack", steady_latency))
        print(f"429 answers from the stand-in: {refused} of {len(posts)} chat.postMessage calls")
        print("lost / duplicated / reordered: " + ("none" if not problems else "; ".join(problems)))
        summary = {
            "machine": machine_info(),
            "channels": args.channels,
            "burst_messages": len(burst),
            "burst_msgs_per_s": burst_rate,
            "burst_interval_s": interval,
            "burst_first_made_to_last_delivered_msgs_per_s": overall,
            "burst_latency_s": {"p50": pct(burst_latency, 0.5), "p99": pct(burst_latency, 0.99)},
            "steady_latency_s": (
                {"p50": pct(steady_latency, 0.5), "p99": pct(steady_latency, 0.99)} if steady_latency else None
            ),
            "http_429": refused,
            "problems": problems,
        }
        (VAR / "results.json").write_text(json.dumps(summary, indent=2))
        if problems:
            raise SystemExit(1)
    finally:
        procs.stop_all()
        standin.stop()


if __name__ == "__main__":
    main()
