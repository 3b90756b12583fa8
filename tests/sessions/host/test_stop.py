"""Stop ends the agent's whole process tree, children that ignore SIGTERM included; a turn's
leftover processes end with it."""

import asyncio
import os
import random
import time

import pytest

from tests.sessions.host import Roots, a_turn, shell

KINDS = ["none", "bwrap"]


def marker() -> str:
    """A sleep duration no other process on the machine has in its command line."""
    return f"{random.randint(5000, 9000)}.{random.randint(10**8, 10**9)}"


def processes_with(text: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        if text in cmdline and stat[stat.rfind(")") + 2] not in "ZX":
            found.append(int(entry))
    return found


def sleeping(mark: str) -> list[int]:
    return [pid for pid in processes_with(mark) if open(f"/proc/{pid}/comm").read().strip() == "sleep"]


async def until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def forking_agent(mark: str) -> str:
    return (
        f'(trap "" TERM; sleep {mark}) & '  # ignores SIGTERM
        f"sh -c 'sleep {mark} | cat' & "  # a pipeline of its own
        f"setsid sh -c 'trap \"\" TERM; sleep {mark}' & "  # a session of its own, ignoring SIGTERM
        f"sleep {mark}; wait"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_stop_ends_the_whole_tree_within_seconds(tmp_path, kind):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.sandbox(kind))
    mark = marker()

    async def scenario():
        assert await runner.stop() is False  # nothing running yet
        turn = asyncio.create_task(runner.run_turn(a_turn(shell(forking_agent(mark)))))
        await until(lambda: len(sleeping(mark)) == 4)
        assert runner.busy
        started = time.monotonic()
        assert await runner.stop() is True
        took = time.monotonic() - started
        return await turn, took

    finished, took = asyncio.run(scenario())
    assert processes_with(mark) == []
    assert took < 6, took
    assert (finished["status"], finished["reply"]) == ("stopped", "")
    assert emitted[0]["type"] == "turn.started"
    assert not runner.busy


@pytest.mark.parametrize("kind", KINDS)
def test_what_a_turn_leaves_running_ends_with_it(tmp_path, kind):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.sandbox(kind))
    mark = marker()
    script = f'(trap "" TERM; sleep {mark}) & sleep {mark} | cat & sleep 0.3; echo finished'
    if kind == "bwrap":  # a child that left the agent's session after its parent ended: only bwrap keeps it
        script = f"setsid sh -c 'sleep {mark}' > /dev/null 2>&1 & {script}"
    started = time.monotonic()
    finished = asyncio.run(runner.run_turn(a_turn(shell(script))))
    assert (finished["status"], finished["reply"]) == ("done", "finished")
    assert time.monotonic() - started < 4  # the background child held stdout: it did not hold the turn
    assert processes_with(mark) == []
