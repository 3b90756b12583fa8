"""Claude Code's `-p --output-format stream-json --verbose` output, one NDJSON line at a time.

Lines are typed: `system` (init, with the session_id), `assistant` (content blocks: text,
tool_use; an `error` field such as authentication_failed), `user` (tool results) and a last
`result`. Unknown types and fields, and lines that are not JSON, are passed over: the CLI
changes between versions and may print plain text. `session_id` is read only from the top
level of a line, never from content the agent wrote.
"""

import json
from dataclasses import dataclass, field

EVENT_TEXT_LIMIT = 4000


def bounded(text: str, limit: int = EVENT_TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _blocks(line: dict) -> list[dict]:
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _result_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (part.get("text") for part in content if isinstance(part, dict))
        return "\n".join(part for part in parts if isinstance(part, str))
    return ""


@dataclass
class ClaudeStream:
    """What the CLI said so far: the session id, its errors, its result line."""

    session_id: str = ""
    result: dict | None = None
    errors: list[str] = field(default_factory=list)  # assistant `error` values, e.g. authentication_failed
    _tool_names: dict[str, str] = field(default_factory=dict)  # tool_use id -> tool name

    def feed(self, raw: str) -> list[dict]:
        """The thread events one output line makes (often none)."""
        try:
            line = json.loads(raw)
        except ValueError:
            return []
        if not isinstance(line, dict):
            return []
        if isinstance(line.get("session_id"), str) and line["session_id"]:
            self.session_id = line["session_id"]
        kind = line.get("type")
        if kind == "assistant":
            return self._assistant(line)
        if kind == "user":
            return self._tool_results(line)
        if kind == "result":
            self.result = line
        return []

    def _assistant(self, line: dict) -> list[dict]:
        said = [b["text"] for b in _blocks(line) if b.get("type") == "text" and isinstance(b.get("text"), str)]
        error = line.get("error")
        if error:
            self.errors.append(str(error))
            return [{"kind": "error", "text": bounded(f"{error}: {' '.join(said)}".strip(": "))}]
        events = [{"kind": "text", "text": bounded(text)} for text in said if text.strip()]
        for block in _blocks(line):
            if block.get("type") == "tool_use":
                name = str(block.get("name") or "")
                self._tool_names[str(block.get("id"))] = name
                arguments = json.dumps(block.get("input"), ensure_ascii=False)
                events.append({"kind": "tool_use", "name": name, "text": bounded(arguments)})
        return events

    def _tool_results(self, line: dict) -> list[dict]:
        return [
            {
                "kind": "tool_result",
                "name": self._tool_names.get(str(block.get("tool_use_id")), ""),
                "text": bounded(_result_text(block.get("content"))),
            }
            for block in _blocks(line)
            if block.get("type") == "tool_result"
        ]

    @property
    def not_logged_in(self) -> bool:
        return "authentication_failed" in self.errors

    @property
    def result_text(self) -> str:
        text = (self.result or {}).get("result")
        return text if isinstance(text, str) else ""

    @property
    def result_errors(self) -> list[str]:
        errors = (self.result or {}).get("errors")
        return [str(error) for error in errors] if isinstance(errors, list) else []

    @property
    def succeeded(self) -> bool:
        return self.result is not None and self.result.get("is_error") is False and not self.errors


# What a turn used, as the host reports it in turn.finished; the gateway validates every value
# again (sessions/usage.py): the host only picks the fields out, it does not vouch for them.
USAGE_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_creation_tokens",
}


def result_usage(result: dict | None) -> dict | None:
    """The usage and cost of a `result` line (None when it reports neither)."""
    if not isinstance(result, dict):
        return None
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    found = {ours: usage[theirs] for theirs, ours in USAGE_FIELDS.items() if theirs in usage}
    if "total_cost_usd" in result:
        found["cost_usd"] = result["total_cost_usd"]
    return found or None


def usage_added(first: dict | None, second: dict | None) -> dict | None:
    """Two runs of one turn (a resume that started afresh) cost both."""
    if not first or not second:
        return first or second
    added = dict(first)
    for key, value in second.items():
        mine = added.get(key)
        both_numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (mine, value))
        added[key] = mine + value if both_numbers else value
    return added
