"""Every tool of both servers, as the servers list them, with 10,000 generated argument sets in
all: valid, near-valid and hostile (tests/tools/fuzz/strategies.py), over real HTTP with the
MCP SDK client. Each call answers a success or a refusal that says what is wrong: never the
SDK's bare "Error executing tool <name>" (a crash inside the tool), never an HTTP error or a
protocol error; and once the worker has drained, every ToolCall row is in a final state.

A new tool is fuzzed without editing this file (its valid calls in tests/hostile.py only
help it reach deeper). Counts per tool and per outcome are printed (-s shows them).
"""

import json
import math
import os
import time
from collections import Counter
from datetime import timedelta
from itertools import zip_longest

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from calvin.chat.links import thread_url
from calvin.workspaces.models import Member, Quota, Repository
from sessions.services import session_start
from tests.conftest import text_of, wait_for
from tests.hostile import OTHER_THREAD_URL, OWN_MESSAGE, OWN_THREAD_URL, VALID_CALLS
from tests.support.git_repos import Upstream
from tests.tools.fuzz.people import People
from tests.tools.fuzz.session import ToolSession
from tests.tools.fuzz.strategies import argument_sets
from tools import limits
from tools.models import Question, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# FUZZ_TOTAL lowers it for a quick local look; the suite runs the 10,000.
TOTAL = int(os.environ.get("FUZZ_TOTAL", 10_000))
FINAL = {ToolCall.Status.APPLIED, ToolCall.Status.FAILED, ToolCall.Status.DENIED, ToolCall.Status.EXPIRED}
# How long, after the last call, the worker and the approvals' sweep may take to end every row.
SETTLE_SECONDS = 120
# Calls in flight on each server: the waits for people and for the database overlap.
CONCURRENCY = 12


@pytest.fixture
def fuzz_agent(agent, settings, monkeypatch, tmp_path, vault):
    """The `agent` fixture's runner, with its limits out of the way (the fuzz is about answers,
    not about limits, which tests/tools/test_limits.py covers) and short waits for people."""
    settings.CALVIN_REFUSALS_PER_MINUTE = 1_000_000  # most calls here are refused, on purpose
    settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = 0.2  # approval_prompt and post_thread, left undecided
    settings.CALVIN_REPOSITORY_SCHEMES = ("file",)
    for tool in limits.PER_RUNNER:
        monkeypatch.setitem(limits.PER_RUNNER, tool, 1_000_000)
    monkeypatch.setattr("approvals.services.MAX_PENDING_PER_SESSION", 1_000_000)
    workspace = agent.session.workspace
    Quota.objects.update_or_create(workspace=workspace, defaults={"tool_calls_per_day": 1_000_000})
    # nanoclaw's approval-gated calls return at once; those left undecided expire this soon.
    type(workspace).objects.filter(id=workspace.id).update(approval_timeout=timedelta(seconds=1))
    (agent.directory / "ok.txt").write_text("a harmless file")
    upstream = Upstream(tmp_path, "api", {"docs/plan.md": "# Plan\n"})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    assert not agent.call("checkout_repo", {"repos": ["api"]}).is_error  # spawn_thread's brief lies in it
    return agent


def _known_valid_calls(agent) -> dict[tuple[str, str], list[dict]]:
    """tests/hostile.py's valid calls, made true for this agent: its own sent message, its own
    thread and another thread of its workspace."""
    other = session_start(workspace=agent.session.workspace, owner=agent.session.owner, title="another").thread
    sent = agent.nanoclaw.call("send_message", {"text": "for edits", "to": "thread"})
    text = json.dumps(VALID_CALLS)
    text = text.replace(OWN_THREAD_URL, thread_url(agent.session.thread_id))
    text = text.replace(OTHER_THREAD_URL, thread_url(other.id))
    text = text.replace(str(OWN_MESSAGE), str(sent.structured_content["messageId"]))
    return {(server, tool): [call] for server, calls in json.loads(text).items() for tool, call in calls.items()}


def _answer_problem(tool: str, result) -> str | None:
    """What is wrong with this answer, or None: a success, or a refusal that says what is wrong."""
    if isinstance(result, BaseException):  # an HTTP error (a 500), a protocol error, no answer
        return f"raised {result!r}"
    if not result.is_error:
        return None
    text = text_of(result)
    detail, generic = text, f"Error executing tool {tool}"
    while detail.startswith(generic):  # the SDK's prefix, once per tool in the chain
        detail = detail.removeprefix(generic).lstrip(": ")
    return None if len(detail) > 5 else f"generic answer {text!r}"


def _cases(tool, examples: int, known: list[dict]) -> list[tuple[str, dict]]:
    """`examples` (kind, arguments) cases drawn by Hypothesis, the same every run."""
    drawn = []

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(argument_sets(tool.input_schema, known))
    def draw(case):
        drawn.append(case)

    draw()
    return drawn


def _all_final() -> bool:
    return (
        not ToolCall.objects.exclude(status__in=FINAL).exists()
        and not Question.objects.filter(status=Question.Status.OPEN).exists()
    )


def _report(counts: Counter, seconds: dict, people: People) -> None:
    by_tool = Counter()
    for (server, tool, _, outcome), n in counts.items():
        by_tool[(server, tool, outcome)] += n
    print(f"\ntool fuzz: {sum(counts.values())} calls", {s: f"{t:.1f} s" for s, t in seconds.items()})
    for server, tool in sorted({(s, t) for s, t, _, _ in counts}):
        kinds = {k: n for (s, t, k, o), n in sorted(counts.items()) if (s, t) == (server, tool) and o == "ok"}
        print(
            f"  {server}/{tool}: ok {by_tool[(server, tool, 'ok')]}, refused {by_tool[(server, tool, 'refused')]}"
            f" (ok by kind: {kinds})"
        )
    outcomes = Counter()
    for (_, _, kind, outcome), n in counts.items():
        outcomes[(kind, outcome)] += n
    print("  by kind:", dict(sorted(outcomes.items())))
    print("  people:", people.decided)
    rows = Counter(ToolCall.objects.values_list("status", flat=True))
    print("  tool call rows:", dict(rows))
    failed = Counter(
        (tool, error[:100]) for tool, error in ToolCall.objects.filter(status="failed").values_list("tool", "error")
    )
    for (tool, error), n in failed.most_common(10):
        print(f"  failed in the worker: {tool} x{n}: {error}")


def test_every_tool_of_both_servers_answers_generated_arguments_specifically(fuzz_agent):
    agents = {"calvin": fuzz_agent, "nanoclaw": fuzz_agent.nanoclaw}
    listed = {}
    for server, agent in agents.items():
        with ToolSession(agent.url, agent.token) as session:
            listed[server] = session.list_tools()
    assert all(listed.values()), listed
    known = _known_valid_calls(fuzz_agent)
    examples = math.ceil(TOTAL / sum(map(len, listed.values())))
    counts, seconds, problems = Counter(), {}, []
    owner = Member.objects.get(id=fuzz_agent.session.owner_id)
    people = People(session=fuzz_agent.session, member=owner)
    people.start()
    try:
        for server, tools in listed.items():
            drawn = {tool.name: _cases(tool, examples, known.get((server, tool.name), [])) for tool in tools}
            # Tools interleaved, so the calls that wait for people overlap the others.
            queues = [[(tool, case) for case in cases] for tool, cases in drawn.items()]
            calls = [call for row in zip_longest(*queues) for call in row if call is not None]
            started = time.monotonic()
            with ToolSession(agents[server].url, agents[server].token) as session:
                results = session.call_many([(tool, arguments) for tool, (_, arguments) in calls], CONCURRENCY)
            seconds[server] = time.monotonic() - started
            for (tool, (kind, arguments)), result in zip(calls, results, strict=True):
                problem = _answer_problem(tool, result)
                if problem:
                    problems.append(f"{server}/{tool} ({kind}): {problem} to {json.dumps(arguments)[:300]}")
                outcome = "broken" if problem else "ok" if not result.is_error else "refused"
                counts[(server, tool, kind, outcome)] += 1
        # Every row ends: the worker applies what was accepted, people and expiry end the approvals.
        try:
            wait_for(_all_final, timeout=SETTLE_SECONDS, interval=0.2)
        except AssertionError:
            stuck = Counter(ToolCall.objects.exclude(status__in=FINAL).values_list("tool", "status"))
            open_questions = Question.objects.filter(status=Question.Status.OPEN).count()
            pytest.fail(
                f"not final {SETTLE_SECONDS} s after the last call: {dict(stuck)}, open questions {open_questions}"
            )
    finally:
        people.stop()
        _report(counts, seconds, people)
    assert not problems, f"{len(problems)} answers were not specific:\n" + "\n".join(problems[:20])
    assert not people.errors, people.errors
    assert sum(counts.values()) >= TOTAL
    # The fuzz reaches the tools' success paths, not only their refusals.
    assert sum(n for (_, _, _, outcome), n in counts.items() if outcome == "ok") > TOTAL // 10
