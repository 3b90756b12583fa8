"""The agent's current step in words, from a tool_use the provider streamed ("running `npm test`")."""

import json
import posixpath

LONGEST = 80


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= LONGEST else text[: LONGEST - 1] + "…"


def _file(arguments: dict) -> str:
    path = arguments.get("file_path") or arguments.get("path") or arguments.get("notebook_path") or ""
    return _short(posixpath.basename(str(path).rstrip("/")) or path) if path else "a file"


def _tool_words(name: str, arguments: dict) -> str:
    if name == "Bash":
        command = str(arguments.get("command") or "").strip().splitlines()
        return f"running `{_short(command[0])}`" if command else "running a command"
    if name in ("Edit", "MultiEdit", "NotebookEdit"):
        return f"editing {_file(arguments)}"
    if name == "Write":
        return f"writing {_file(arguments)}"
    if name == "Read":
        return f"reading {_file(arguments)}"
    if name == "Grep":
        return f"searching for {_short(arguments.get('pattern') or '…')}"
    if name == "Glob":
        return f"looking for files {_short(arguments.get('pattern') or '')}".strip()
    if name == "WebSearch":
        return f"searching the web for {_short(arguments.get('query') or '…')}"
    if name == "WebFetch":
        return f"reading {_short(arguments.get('url') or 'a web page')}"
    if name == "Task":
        return f"delegating: {_short(arguments.get('description') or 'a task')}"
    if name == "TodoWrite":
        return "updating its to-do list"
    # MCP tools arrive as mcp__<server>__<tool>: people know the tool's own name.
    return f"using {_short(name.rsplit('__', 1)[-1] or 'a tool')}"


def step_words(kind: str, name: str, text: str) -> str:
    """`text` of a tool_use is its input as JSON (already redacted by the gateway)."""
    if kind == "tool_use":
        try:
            arguments = json.loads(text) if text else {}
        except ValueError:
            arguments = {}
        return _tool_words(name, arguments if isinstance(arguments, dict) else {})
    # After a tool answered, until the next step: the agent reads the answer and decides.
    return {"tool_result": "thinking", "text": "writing", "started": "working"}.get(kind, "")
