"""The README's tool tables, made from the servers themselves: each tool's parameters from its
pydantic signature (the schema tools/list shows) and its availability per mode from
tools.availability. `python manage.py tool_tables --write` puts them in README.md between the
markers; tests/tools/test_tool_tables.py fails when the README and the code differ."""

import asyncio
import re

from tools.availability import CALVIN, HOSTED, NANOCLAW, ONE_MACHINE, SELF_HOSTED, definition_needed, tool_offered

BEGIN, END = "<!-- tool tables: begin (python manage.py tool_tables --write) -->", "<!-- tool tables: end -->"
MODES = (ONE_MACHINE, SELF_HOSTED, HOSTED)
SERVERS = {CALVIN: "`calvin` at `/mcp` (seed 000)", NANOCLAW: "`nanoclaw` at `/mcp/nanoclaw` (seed 002)"}
# What a mode's cell says beyond yes / no (seed 000's table words them so).
NOTES = {
    (CALVIN, "preview", SELF_HOSTED): "offered; the gateway refuses the call",
    (CALVIN, "unpreview", SELF_HOSTED): "offered; the gateway refuses the call",
    (CALVIN, "request_secret", SELF_HOSTED): "yes; fails unless the gateway has `SP_STORE_KEY`",
    (CALVIN, "approval_prompt", ONE_MACHINE): "claude-code runners only",
    (CALVIN, "approval_prompt", SELF_HOSTED): "claude-code runners only",
    (CALVIN, "approval_prompt", HOSTED): "claude-code runners only",
}


def _type(schema: dict, defs: dict) -> str:
    if "$ref" in schema:
        return defs.get(schema["$ref"].rsplit("/", 1)[-1], {}).get("title", "object")
    if "anyOf" in schema:
        kinds = [_type(option, defs) for option in schema["anyOf"] if option.get("type") != "null"]
        return " or ".join(kinds)
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}), defs)}"
    if "enum" in schema:
        return " / ".join(f"`{value}`" for value in schema["enum"])
    return kind


def _bounds(schema: dict) -> str:
    schema = next((o for o in schema.get("anyOf", []) if o.get("type") != "null"), schema)
    items = {"array": " items", "string": " characters"}.get(schema.get("type"), "")
    low = schema.get("minLength", schema.get("minimum", schema.get("minItems")))
    high = schema.get("maxLength", schema.get("maximum", schema.get("maxItems")))
    if high is not None and high >= 2**53:  # a database id's bound says nothing to a reader
        high = None
    if low is not None and high is not None:
        return f", {low:,}..{high:,}{items}"
    if high is not None:
        return f", at most {high:,}{items}"
    if low:
        return f", at least {low:,}{items}"
    return ""


def parameters(input_schema: dict) -> str:
    defs = input_schema.get("$defs", {})
    required = set(input_schema.get("required", []))
    shown = []
    for name, schema in input_schema.get("properties", {}).items():
        mark = "" if name in required else "?"
        shown.append(f"`{name}`{mark}: {_type(schema, defs)}{_bounds(schema)}")
    return "; ".join(shown) or "none"


def _cell(server: str, tool: str, mode: str) -> str:
    if (server, tool, mode) in NOTES:
        return NOTES[(server, tool, mode)]
    if not tool_offered(tool, mode, server):
        return "no"
    if definition_needed(tool, mode, server):
        return "when the host has a workspace definition"
    return "yes"


async def _tools(server: str) -> list:
    from mcp.client import Client

    from tools.server import build_server

    async with Client(build_server(HOSTED, server)) as client:  # hosted lists every tool of the set
        return (await client.list_tools()).tools


def tool_tables() -> str:
    parts = [BEGIN]
    for server, title in SERVERS.items():
        parts += ["", f"{title}; `?` marks an optional parameter.", ""]
        parts += ["| tool | parameters | one-machine | self-hosted | hosted |", "| --- | --- | --- | --- | --- |"]
        for tool in sorted(asyncio.run(_tools(server)), key=lambda t: t.name):
            cells = " | ".join(_cell(server, tool.name, mode) for mode in MODES)
            parts.append(f"| `{tool.name}` | {parameters(tool.input_schema)} | {cells} |")
    parts += ["", END]
    return "\n".join(parts)


def readme_with_tool_tables(readme: str) -> str:
    """The README with its block between the markers replaced (ValueError without the markers)."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(readme):
        raise ValueError(f"README.md has no {BEGIN} ... {END} block")
    return pattern.sub(lambda _match: tool_tables(), readme, count=1)
