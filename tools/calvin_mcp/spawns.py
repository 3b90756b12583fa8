"""spawn_thread as an MCP tool: a thin adapter over tools.services.spawns."""

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from tools.adapter import call_async_service
from tools.auth import caller_from_context
from tools.services.spawns import MAX_TASK, MIN_TASK, thread_spawn

DESCRIPTION = """Starts a session in a new thread, with the same owner and permission mode. The gateway posts the \
task and a link to the brief as the new thread's first message: in Slack, a top-level message in this session's \
channel, or in the owner's direct messages when this thread is in a code channel, which starts the new thread; in \
the web channel, a new thread listed beside this one (in the same space). This session's thread shows a link to it.

Limit: 8 per runner. The workspace also bounds trees of spawned threads: how many levels below its root a \
new thread may be (3 unless its admins changed it), and how many spawned threads under one root may be alive at \
once (20); past either the call is refused naming the limit. Returns the new thread's URL (in Slack, once Slack \
has taken the message)."""


class Spawned(BaseModel):
    tool_call_id: int = Field(description="Calvin's id for this call (audit, dashboard).")
    url: str = Field(description="The new thread: its Slack link, or its page in Calvin.")
    model: str = Field(description="The new session's model tier.")
    note: str = Field(default="", description="Where the thread went when this thread is in a code channel.")


async def spawn_thread(
    task: Annotated[
        str,
        Field(
            description="What the new thread should do: one line.",
            json_schema_extra={"minLength": MIN_TASK, "maxLength": MAX_TASK},
        ),
    ],
    brief: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1000,
            description="Path of a `.md` file inside the session directory, relative to it, with an optional"
            " `#anchor`. Must be on the fetched default branch of its repository.",
        ),
    ],
    ctx: Context,
    model: Annotated[
        Literal["smart", "fast", "default"] | None, Field(description="Model tier. Omitted: the parent's model.")
    ] = None,
) -> Spawned:
    result = await call_async_service(
        thread_spawn, caller=caller_from_context(ctx), task=task, brief=brief, model=model
    )
    return Spawned(
        tool_call_id=result["tool_call_id"], url=result["url"], model=result["model"], note=result.get("note", "")
    )


TOOLS = [("spawn_thread", spawn_thread, DESCRIPTION)]
