"""Many agents calling tools through the real MCP endpoints, while something breaks.

    outcome = drive(url=web.url + "/mcp", runners=sessions, tool="post_card", per_client=40)
    landed = landed_markers(stack)       # Counter of markers in delivered Message rows
    outcome.check_exactly_once(landed)   # every call the client was told succeeded, once

Each runner is one client (its own session and token) making `per_client` calls one after
another. Every attempt carries a marker of its own: a call that failed (an error result, a
reset connection, a timeout) is retried with a new marker on a new MCP session, as an agent
would retry. So a marker the client was told succeeded must land exactly once; a marker whose
call failed may have landed (committed before the answer was lost) but never twice.
"""

import asyncio
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


def card_arguments(marker: str) -> dict:
    return {
        "spec": {
            "root": "card",
            "elements": {
                "card": {"type": "Card", "props": {"title": f"Build {marker}"}, "children": ["status"]},
                "status": {"type": "Field", "props": {"label": "Status", "value": "passed"}},
            },
        }
    }


def message_arguments(marker: str) -> dict:
    return {"text": f"Update {marker}", "to": "thread"}


ARGUMENTS = {"post_card": card_arguments, "send_message": message_arguments}
SERVER_PATH = {"post_card": "/mcp", "send_message": "/mcp/nanoclaw"}


@dataclass
class Outcome:
    run: str
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    last_success_at: float = 0.0

    @property
    def pattern(self) -> re.Pattern:
        return re.compile(rf"rm{self.run}c\d+n\d+")

    def check_exactly_once(self, landed: Counter) -> None:
        lost = [m for m in self.succeeded if landed[m] == 0]
        doubled = {m: n for m, n in landed.items() if n > 1}
        assert not lost and not doubled, (
            f"{len(lost)} of {len(self.succeeded)} accepted calls lost (e.g. {lost[:3]}), "
            f"{len(doubled)} landed more than once (e.g. {list(doubled.items())[:3]})"
        )


def drive(*, base_url: str, runners: list[dict], tool: str, per_client: int, deadline_s: float = 120) -> Outcome:
    return asyncio.run(
        drive_async(base_url=base_url, runners=runners, tool=tool, per_client=per_client, deadline_s=deadline_s)
    )


async def drive_async(*, base_url, runners, tool, per_client, deadline_s=120) -> Outcome:
    outcome = Outcome(run=uuid.uuid4().hex[:6])
    deadline = time.monotonic() + deadline_s
    url = base_url + SERVER_PATH[tool]
    arguments = ARGUMENTS[tool]

    async def client(index: int, runner: dict) -> None:
        done = 0
        attempt = 0
        while done < per_client:
            assert time.monotonic() < deadline, (
                f"client {index}: {done} of {per_client} calls in {deadline_s} s; last errors: {outcome.errors[-2:]}"
            )
            marker = None
            try:
                async with asyncio.timeout(30):
                    headers = {"Authorization": f"Bearer {runner['token']}"}
                    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
                        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as mcp:
                            while done < per_client:
                                attempt += 1
                                marker = f"rm{outcome.run}c{index}n{attempt}"
                                result = await mcp.call_tool(tool, arguments(marker))
                                if result.is_error:
                                    outcome.failed.append(marker)
                                    outcome.errors.append(" ".join(getattr(p, "text", "") for p in result.content))
                                    marker = None
                                    await asyncio.sleep(0.2)
                                    continue
                                outcome.succeeded.append(marker)
                                outcome.last_success_at = time.monotonic()
                                marker = None
                                done += 1
            except Exception as error:  # a reset connection, a 5xx, a timeout: a new session, a new attempt
                if marker:
                    outcome.failed.append(marker)
                outcome.errors.append(repr(error)[:300])
                await asyncio.sleep(0.3)

    await asyncio.gather(*(client(i, r) for i, r in enumerate(runners)))
    return outcome


def landed_markers(stack, pattern: re.Pattern) -> Counter:
    """How many delivered messages of the stack's threads carry each marker (in text or card)."""
    rows = stack.query(
        "SELECT coalesce(text, '') || ' ' || coalesce(card::text, '') FROM agent_sessions_message"
        " WHERE delivered_at IS NOT NULL"
    )
    return Counter(marker for (content,) in rows for marker in set(pattern.findall(content)))


def unfinished_calls(stack, *, unpublished_of: set[str] | None = None) -> int:
    """ToolCall rows still pending or applying. `unpublished_of`: markers whose callers were told the
    call failed; such a call left pending and never claimed is not counted (its COMMIT reached the
    server but the answer was lost, so nothing published it: the lost-pending sweep's work)."""
    rows = stack.query(
        "SELECT status, attempts, arguments::text FROM tools_toolcall WHERE status IN ('pending', 'applying')"
    )
    if unpublished_of is None:
        return len(rows)
    pattern = re.compile(r"rm\w+c\d+n\d+")

    def excused(status, attempts, arguments) -> bool:
        markers = set(pattern.findall(arguments))
        return status == "pending" and attempts == 0 and bool(markers) and markers <= unpublished_of

    return sum(1 for row in rows if not excused(*row))
