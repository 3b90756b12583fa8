"""preview and unpreview as MCP tools: thin adapters over tools.services.previews."""

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from tools.adapter import call_async_service, call_service
from tools.auth import caller_from_context
from tools.services.previews import MAX_LABEL, preview_close, preview_open

LABEL = "One DNS label (lowercase letters, digits, hyphens; up to 63 characters)."


class Preview(BaseModel):
    url: str = Field(description="The public URL.")
    name: str = Field(description="The label at the start of the URL.")
    listening: bool = Field(description="Whether something was listening on the port.")


class Unpreviewed(BaseModel):
    name: str
    removed: bool


async def preview(
    port: Annotated[
        int, Field(strict=True, ge=1, le=65535, description="The port the server listens on, on localhost.")
    ],
    ctx: Context,
    name: Annotated[
        str | None,
        Field(
            max_length=MAX_LABEL,
            description=f"{LABEL} Omitted: a generated name, or the port's existing one.",
        ),
    ] = None,
) -> Preview:
    return Preview(**await call_async_service(preview_open, caller=caller_from_context(ctx), port=port, name=name))


async def unpreview(
    name: Annotated[
        str, Field(max_length=MAX_LABEL, description="The preview's name, the label at the start of its URL.")
    ],
    ctx: Context,
) -> Unpreviewed:
    return Unpreviewed(**await call_service(preview_close, caller=caller_from_context(ctx), name=name))


PREVIEW = """Gives an HTTP server listening on a port of the computer a public URL. Anyone with the URL can open \
it (unless the session's owner limits it to the workspace's members). Plain HTTP on that port only; the URL works \
while the server runs. Returns the URL, the name, and whether something was listening on the port.

`name` omitted: the port's existing preview name, else a generated one (16 random hex characters). The same port \
with a new name adds a second name: URLs already given out keep working; unpreview takes one name down. A name of \
this session on another port moves to this port. At most 20 live previews per session. Refused: a name another \
session's preview has, a name that is not one DNS label, a host not connected or without a sandbox, and any call on \
a self-hosted gateway."""

UNPREVIEW = "Takes down a preview URL (one name; the port's other names stay). Only this session's previews."

TOOLS = [("preview", preview, PREVIEW), ("unpreview", unpreview, UNPREVIEW)]
