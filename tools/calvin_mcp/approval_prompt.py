"""approval_prompt as an MCP tool: a thin adapter over tools.services.approval_prompts.

Claude Code reads the answer as JSON inside the result's text content, so the tool returns
one text block and no structured content (which the SDK would wrap as {"result": "<the text>"}).
"""

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import TextContent
from pydantic import Field

from tools.adapter import call_service
from tools.auth import caller_from_context
from tools.nanoclaw_mcp.interactive import _client_gone  # the same watch as ask_user_question's
from tools.services.approval_prompts import (
    MAX_TOOL_NAME,
    MAX_TOOL_USE_ID,
    approval_prompt_ask,
    approval_prompt_wait,
)

DESCRIPTION = """Claude Code's permission prompt (--permission-prompt-tool mcp__calvin__approval_prompt): asks a \
person, with an approval card in the session's thread, whether a tool use may run, waits for the decision and \
answers with JSON text: {"behavior": "allow", "updatedInput": {...}} or {"behavior": "deny", "message": "..."}.

Only the person who started the session or a workspace admin decides; an undecided request expires and is \
answered deny, saying it expired. Sessions in bypassPermissions mode are allowed at once. input is at most \
64 KiB as JSON. Offered only to Claude Code runners."""


async def approval_prompt(
    tool_name: Annotated[
        str, Field(min_length=1, max_length=MAX_TOOL_NAME, description="The tool Claude Code wants to use, e.g. Bash.")
    ],
    input: Annotated[dict[str, Any], Field(description="The tool's input, as it would run.")],
    ctx: Context,
    tool_use_id: Annotated[
        str | None, Field(max_length=MAX_TOOL_USE_ID, description="Claude Code's id for this tool use.")
    ] = None,
) -> TextContent:
    asked = await call_service(
        approval_prompt_ask, caller=caller_from_context(ctx), tool_name=tool_name, input=input, tool_use_id=tool_use_id
    )
    answer = asked["answer"]
    if answer is None:
        answer = await approval_prompt_wait(asked, tool_input=input, client_gone=_client_gone(ctx))
    return TextContent(type="text", text=json.dumps(answer, ensure_ascii=False))


TOOLS = [("approval_prompt", approval_prompt, DESCRIPTION)]
