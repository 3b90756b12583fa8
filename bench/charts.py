"""The dashboard's chart queries against 1,000,000 tool calls: p50 / p95 per chart and period.

    .venv/bin/python bench/charts.py [--rows 1000000] [--runs 20] [--keep] [--compare]

Builds a fresh database `calvin_bench_charts` (migrated, so with the indexes Calvin ships), five
workspaces (the measured one holds 60 % of the sessions and so of every kind of row), then
1,000,000 tool calls, 200,000 turns and 50,000 decided approvals over the last 35 days with
INSERT … SELECT generate_series (seconds, not minutes), ANALYZE, and times each selector of
calvin/dashboard/chart_selectors.py (and the home page's counts and search) `--runs` times per
period after one warm-up run, and each once with nothing cached first. `--compare` also times the
tool-call chart without the index tools/migrations/0003 adds; `--turn-indexes` adds indexes on
the turns' and approvals' times first. `--keep` reuses the database of the last run (no rebuild).
See bench/README.md.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from hosts import bench_environment, prepare  # noqa: E402

VAR = ROOT / "var" / "bench-charts"
DB_NAME = "calvin_bench_charts"
REDIS_URL = "redis://127.0.0.1:6379/12"
ENV = bench_environment(db_name=DB_NAME, redis_url=REDIS_URL, name="calvin-bench-charts", var=VAR)
os.environ.update(ENV)

TOOLS = [
    "send_message",
    "post_card",
    "send_file",
    "read_thread",
    "add_reaction",
    "edit_message",
    "ask_user_question",
    "checkout_repo",
    "preview",
    "spawn_thread",
    "request_secret",
    "install_packages",
]
WORKSPACES = 5
SESSIONS = 5_000  # 3,000 in the measured workspace, 500 in each other
TARGET_SHARE = 0.6
DAYS = 35
# Not in Calvin's migrations (sessions and approvals are other parts' apps): --turn-indexes
# measures what they would bring.
TURN_INDEXES = [
    ("agent_sessions_turn", "finished_at"),
    ("agent_sessions_turn", "created_at"),
    ("approvals_pendingapproval", "decided_at"),
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def build(rows: int) -> int:
    """The bench's data; returns the measured workspace's id."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from calvin.workspaces.models import Agent, Member
    from calvin.workspaces.services import workspace_create
    from sessions.models import Session, Thread

    t0 = time.perf_counter()
    users = get_user_model().objects
    workspaces = [
        workspace_create(name=f"Bench {i}", slug=f"bench-{i}", owner_user=users.create_user(f"owner{i}"))
        for i in range(WORKSPACES)
    ]
    target = workspaces[0]
    sessions_of = [round(SESSIONS * TARGET_SHARE)] + [round(SESSIONS * (1 - TARGET_SHARE) / (WORKSPACES - 1))] * (
        WORKSPACES - 1
    )
    for workspace, count in zip(workspaces, sessions_of, strict=True):
        owner = Member.objects.get(workspace=workspace)
        agents = Agent.objects.bulk_create([Agent(workspace=workspace, name=f"agent-{i}") for i in range(10)])
        threads = Thread.objects.bulk_create(
            [
                Thread(workspace=workspace, channel_id="web", thread_ts=f"bench-{workspace.id}-{i}", title=f"task {i}")
                for i in range(count)
            ],
            batch_size=2000,
        )
        statuses = ["idle"] * 6 + ["finished"] * 3 + ["running"]
        Session.objects.bulk_create(
            [
                Session(
                    workspace=workspace,
                    agent=agents[i % 10],
                    thread=thread,
                    owner=owner,
                    status=statuses[i % len(statuses)],
                    directory=f"/bench/{thread.id}",
                )
                for i, thread in enumerate(threads)
            ],
            batch_size=2000,
        )
    print(f"workspaces, agents, threads, sessions: {time.perf_counter() - t0:.1f} s", flush=True)

    # Rows go to sessions picked at random, so each workspace gets its sessions' share.
    ids = "(SELECT array_agg(id ORDER BY id) FROM agent_sessions_session)"
    pick = "s.ids[1 + floor(random() * array_length(s.ids, 1))::int]"
    ago = f"now() - random() * interval '{DAYS} days'"
    tools = "ARRAY[" + ", ".join(f"'{t}'" for t in TOOLS) + "]"
    member = Member.objects.filter(workspace=target).values_list("id", flat=True).first()
    with connection.cursor() as cursor:
        t0 = time.perf_counter()
        cursor.execute(
            f"""
            INSERT INTO tools_toolcall (session_id, runner_id, server, tool, arguments, payload, file, status,
                                        result, error, platform_ids, attempts, created_at, claimed_at, finished_at)
            SELECT {pick}, NULL, 'calvin',
                   ({tools})[1 + floor(power(random(), 2) * {len(TOOLS)})::int],
                   '{{}}', '{{}}', '', 'applied', NULL, '', '{{}}', 1, t.at, t.at, t.at + interval '40 ms'
            FROM (SELECT {ids} AS ids) s,
                 LATERAL (SELECT g, {ago} AS at FROM generate_series(1, %s) g) t
            """,
            [rows],
        )
        print(f"{rows:,} tool calls: {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        cursor.execute(
            f"""
            INSERT INTO agent_sessions_turn (session_id, prompt_id, status, runner_id, host_id, batch_id, attempts,
                error, created_at, started_at, finished_at, agent_seconds, input_tokens, output_tokens,
                cache_read_tokens, cache_creation_tokens, cost_usd)
            SELECT {pick}, NULL, 'done', NULL, NULL, NULL, 1, '', t.at, t.at, t.at + t.secs * interval '1 s', t.secs,
                   1000, 500, 0, 0, CASE WHEN random() < 0.8 THEN round((random() * 0.5)::numeric, 6) END
            FROM (SELECT {ids} AS ids) s,
                 LATERAL (SELECT g, {ago} AS at, (5 + random() * 600)::int AS secs
                          FROM generate_series(1, %s) g) t
            """,
            [rows // 5],
        )
        cursor.execute(
            f"""
            INSERT INTO approvals_pendingapproval (session_id, tool_call_id, kind, summary, details, status,
                requested_at, expires_at, decided_by_id, decided_via, decided_at, finished_at, card_platform_ids)
            SELECT {pick}, NULL, 'post_thread', 'post', '{{}}', 'applied', t.at, t.at + interval '1 day', %s, 'web',
                   t.at + (-ln(1 - random()) * 300) * interval '1 s', NULL, '{{}}'
            FROM (SELECT {ids} AS ids) s,
                 LATERAL (SELECT g, {ago} AS at FROM generate_series(1, %s) g) t
            """,
            [member, rows // 20],
        )
        print(f"{rows // 5:,} turns, {rows // 20:,} approvals: {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        cursor.execute("ANALYZE")
        print(f"ANALYZE: {time.perf_counter() - t0:.1f} s", flush=True)
    return target.id


def timed(fn, runs: int, warm: bool = True) -> list[float]:
    if warm:
        fn()  # warm-up: plans, pages and settled hours cached, as on a dashboard people keep open
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def measure(workspace, runs: int, warm: bool = True) -> list[tuple[str, list[float]]]:
    from calvin.dashboard import chart_selectors as charts
    from calvin.dashboard.workspace_selectors import SessionFilters, session_state_counts, sessions_page

    results = []
    for name, select in (
        ("tool calls by tool", charts.tool_calls_by_tool),
        ("approval latency p50/p90", charts.approval_latency),
        ("agent minutes", charts.agent_minutes),
        ("spend", charts.spend),
        ("turns per agent", charts.turns_per_agent),
    ):
        for key, period in charts.PERIODS.items():
            results.append((f"{name}, {key}", timed(lambda s=select, p=period: s(workspace, p), runs, warm)))
    results.append(("home: sessions by state", timed(lambda: session_state_counts(workspace), runs)))
    search = SessionFilters(q="task 1234")
    results.append(("home: search, page 1", timed(lambda: list(sessions_page(workspace, search, 1)), runs)))
    last = SessionFilters()
    results.append(("home: sessions, page 100", timed(lambda: list(sessions_page(workspace, last, 100)), runs)))
    return results


def print_rows(results, target_ms: float = 200.0) -> bool:
    ok = True
    for name, values in results:
        p95 = pct(values, 0.95)
        ok &= p95 < target_ms
        print(f"{name:<34} p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms   n={len(values)}")
    return ok


def without_index(workspace, runs: int, index: str) -> list[tuple[str, list[float]]]:
    """The tool-call chart with Calvin's index dropped inside a transaction rolled back after."""
    from django.db import connection, transaction

    from calvin.dashboard import chart_selectors as charts

    out = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f'DROP INDEX "{index}"')
        for key, period in charts.PERIODS.items():
            out.append(
                (f"tool calls by tool, {key}", timed(lambda p=period: charts.tool_calls_by_tool(workspace, p), runs))
            )
        transaction.set_rollback(True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="reuse the last run's database")
    parser.add_argument("--compare", action="store_true", help="also time the tool-call chart without the index")
    parser.add_argument(
        "--turn-indexes", action="store_true", help="add indexes on the turns' and approvals' times first"
    )
    args = parser.parse_args()
    if not args.keep:
        prepare(db_name=DB_NAME, redis_url=REDIS_URL, var=VAR)

    import django

    django.setup()
    from django.core.cache import cache
    from django.db import connection

    from calvin.workspaces.models import Workspace

    workspace = Workspace.objects.filter(slug="bench-0").first() if args.keep else None
    workspace = workspace or Workspace.objects.get(id=build(args.rows))
    from tools.models import ToolCall

    mine = ToolCall.objects.filter(session__workspace=workspace).count()
    print(f"\n{ToolCall.objects.count():,} tool calls, {mine:,} in the measured workspace")
    if args.turn_indexes:
        with connection.cursor() as cursor:
            for table, column in TURN_INDEXES:
                cursor.execute(f"CREATE INDEX IF NOT EXISTS bench_{table}_{column} ON {table} ({column})")
            cursor.execute("ANALYZE")
        print("with indexes on " + ", ".join(f"{t}.{c}" for t, c in TURN_INDEXES))
    cache.clear()
    print("\ncold: each chart once with nothing cached (a first view; later views group only new hours)")
    cold = measure(workspace, 1, warm=False)
    print_rows([(name, values) for name, values in cold if not name.startswith("home")], target_ms=float("inf"))
    print(f"\nwarm: {args.runs} runs per row after one warm-up")
    ok = print_rows(measure(workspace, args.runs))
    if args.compare:
        print("\nwithout toolcall_created_covering (the index tools/migrations/0003 adds):")
        print_rows(without_index(workspace, args.runs, "toolcall_created_covering"))
    print("\np95 under 200 ms on every row" if ok else "\nSOME ROW'S p95 IS 200 ms OR MORE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
