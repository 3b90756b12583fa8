"""send_file as an MCP tool: a thin adapter over tools.services.files."""

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from tools.adapter import call_service
from tools.auth import caller_from_context
from tools.results import Queued
from tools.services.files import files_send


async def send_file(
    path: Annotated[
        str, Field(min_length=1, max_length=4096, description="Absolute, or relative to the session directory.")
    ],
    ctx: Context,
    comment: Annotated[str | None, Field(max_length=3000, description="Message posted with the file.")] = None,
    title: Annotated[str | None, Field(max_length=200, description="Defaults to the file name.")] = None,
    alt_text: Annotated[str | None, Field(max_length=1000, description="Image description for screen readers.")] = None,
) -> Queued:
    result = await call_service(
        files_send, caller=caller_from_context(ctx), path=path, comment=comment, title=title, alt_text=alt_text
    )
    return Queued(tool_call_id=result["tool_call_id"], status=result["status"])


TOOLS = [
    (
        "send_file",
        send_file,
        "Posts a file into the session's thread. PNG, JPEG, GIF and WebP images render inline. "
        "The file must be regular, non-empty, at most 100 MiB, inside the session directory or the "
        "system temp directory (this session's own, $TMPDIR); 50 files per runner; a file containing one of "
        "the session's secrets, or a name, title or comment containing one, is refused.",
    ),
]
