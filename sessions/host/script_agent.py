"""The `script` agent: plays a JSON list of steps through the session's real MCP endpoints.

    python -m sessions.host.script_agent <script.json>   (the turn's prompt on stdin)

Steps: `{"server": "calvin"|"nanoclaw", "tool": "...", "arguments": {...}}` (server defaults
to calvin), `{"reply": "text"}`, `{"sleep": seconds}`, `{"usage": {"cost_usd": 0.5, "input_tokens": 10, ...}}`
(what the turn spent so far, reported at once and again in the result line). `{prompt}` in any string argument or
reply is replaced by the prompt. The gateway's URLs and the runner token come from the
session's `.mcp.json` in the working directory. Prints NDJSON events to stdout (tool_use,
tool_result, text) and last `{"kind": "result", "text": <last reply>}`. A tool error is
reported and the script goes on; a malformed script runs no step and exits 2.

Runs in the agent's sandbox: no Django here, only the MCP SDK.
"""

import asyncio
import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path

MAX_SLEEP = 3600


class ScriptError(Exception):
    pass


def servers_from(config_path: Path) -> dict[str, dict]:
    """name -> {"url", "headers"} of the HTTP servers in the .mcp.json the runner wrote (the
    agent's own stdio servers are for Claude Code to start, not for a script)."""
    try:
        servers = json.loads(config_path.read_text())["mcpServers"]
        return {
            name: {"url": s["url"], "headers": s.get("headers") or {}}
            for name, s in servers.items()
            if s.get("type", "http") == "http"
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ScriptError(f"no usable .mcp.json in the session directory ({error})") from None


def _step_problem(step, servers: dict) -> str:
    if not isinstance(step, dict):
        return "a step is a JSON object"
    keys = set(step)
    if "tool" in step:
        if not keys <= {"server", "tool", "arguments"}:
            return f"unexpected keys {sorted(keys - {'server', 'tool', 'arguments'})}"
        server = step.get("server", "calvin")
        if server not in servers:
            return f"no MCP server {server!r} for this session (it has: {', '.join(sorted(servers)) or 'none'})"
        if not isinstance(step["tool"], str) or not step["tool"]:
            return "tool must be a tool's name"
        if not isinstance(step.get("arguments", {}), dict):
            return "arguments must be an object"
        return ""
    if keys == {"reply"}:
        return "" if isinstance(step["reply"], str) else "reply must be text"
    if keys == {"usage"}:
        return "" if isinstance(step["usage"], dict) else "usage must be an object"
    if keys == {"sleep"}:
        seconds = step["sleep"]
        valid = isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 <= seconds <= MAX_SLEEP
        return "" if valid else f"sleep must be a number of seconds from 0 to {MAX_SLEEP}"
    return f"unknown step with keys {sorted(keys)} (expected tool, reply or sleep)"


def parse_script(text: str, servers: dict) -> list[dict]:
    """Every step checked before any runs: a malformed script has no half-done effects."""
    try:
        steps = json.loads(text)
    except ValueError as error:
        raise ScriptError(f"the script is not JSON: {error}") from None
    if not isinstance(steps, list):
        raise ScriptError("a script is a JSON list of steps")
    problems = [f"step {n}: {problem}" for n, step in enumerate(steps, 1) if (problem := _step_problem(step, servers))]
    if problems:
        raise ScriptError("; ".join(problems))
    return steps


def fill(value, prompt: str):
    """`{prompt}` replaced in every string inside `value`."""
    if isinstance(value, str):
        return value.replace("{prompt}", prompt)
    if isinstance(value, list):
        return [fill(item, prompt) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, prompt) for key, item in value.items()}
    return value


def say(event: dict) -> None:
    print(json.dumps(event, ensure_ascii=False), flush=True)


def describe(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:  # the SDK's task groups wrap the cause
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


def result_text(result) -> str:
    text = "\n".join(part.text for part in result.content if getattr(part, "text", None))
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    return text


class Connections:
    """One MCP client per server, opened at its first call and kept for the script."""

    def __init__(self, stack: AsyncExitStack, servers: dict):
        self.stack, self.servers, self.clients = stack, servers, {}

    async def client(self, name: str):
        if name not in self.clients:
            import httpx2
            from mcp.client import Client
            from mcp.client.streamable_http import streamable_http_client

            server = self.servers[name]
            http = await self.stack.enter_async_context(httpx2.AsyncClient(headers=server["headers"], timeout=300))
            transport = streamable_http_client(server["url"], http_client=http)
            self.clients[name] = await self.stack.enter_async_context(Client(transport, mode="legacy"))
        return self.clients[name]


async def play(steps: list[dict], servers: dict, prompt: str, spent: dict) -> str:
    reply = ""
    async with AsyncExitStack() as stack:
        connections = Connections(stack, servers)
        for step in steps:
            if "sleep" in step:
                await asyncio.sleep(step["sleep"])
            elif "usage" in step:
                spent.clear()
                spent.update(step["usage"])
                say({"kind": "usage", "usage": spent})
            elif "reply" in step:
                reply = fill(step["reply"], prompt)
                say({"kind": "text", "text": reply})
            else:
                tool, arguments = step["tool"], fill(step.get("arguments", {}), prompt)
                say({"kind": "tool_use", "name": tool, "text": json.dumps(arguments, ensure_ascii=False)})
                try:
                    client = await connections.client(step.get("server", "calvin"))
                    result = await client.call_tool(tool, arguments)
                    event = {"is_error": bool(result.is_error), "text": result_text(result)}
                except Exception as error:  # a failed call is reported like a tool error; the script goes on
                    event = {"is_error": True, "text": describe(error)}
                say({"kind": "tool_result", "name": tool, **event})
    return reply


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m sessions.host.script_agent <script.json>", file=sys.stderr)
        return 2
    try:
        servers = servers_from(Path.cwd() / ".mcp.json")
        steps = parse_script(Path(argv[1]).read_text(), servers)
    except (OSError, ScriptError) as error:
        print(f"script: {error}", file=sys.stderr)
        return 2
    prompt = sys.stdin.read()
    spent: dict = {}
    reply = asyncio.run(play(steps, servers, prompt, spent))
    say({"kind": "result", "text": reply, **({"usage": spent} if spent else {})})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
