"""A refused tool call's own text, without the MCP SDK's "Error executing tool <name>: " prefix."""

import re

PREFIX = re.compile(r"^Error executing tool [a-z_]+: ")


def refusal(result) -> str:
    assert result.is_error, "the call was not refused"
    text = "\n".join(part.text for part in result.content if getattr(part, "text", None))
    assert PREFIX.match(text), f"not a tool's own refusal: {text!r}"
    return PREFIX.sub("", text, count=1)
