"""send_message, send_file, edit_message, add_reaction: thin adapters over the message and file services."""

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from tools.adapter import call_service
from tools.auth import caller_from_context
from tools.services.messages import message_edit, message_send, reaction_add
from tools.services.nanoclaw_files import nanoclaw_file_send

To = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="Destination name (e.g. `family`, `worker-1`); `thread` is this session's own thread.",
    ),
]
MessageId = Annotated[int, Field(ge=1, le=2**63 - 1, description="Numeric id of a previously sent message")]


class Sent(BaseModel):
    messageId: int = Field(description="The message's id, for edit_message and add_reaction.")
    to: str
    status: str


class Changed(BaseModel):
    messageId: int
    status: str


class FileQueued(BaseModel):
    tool_call_id: int
    to: str
    status: str
    file_name: str
    path: str | None = Field(
        default=None, description="To an agent: where it lands in that agent's directory (inbox/<from>/<name>)."
    )
    messageId: int | None = Field(default=None, description="To an agent: the message in its inbox naming the file.")


async def send_message(
    text: Annotated[str, Field(min_length=1, max_length=40_000, description="Message content")],
    to: To,
    ctx: Context,
) -> Sent:
    return Sent(**await call_service(message_send, caller=caller_from_context(ctx), text=text, to=to))


async def send_file(
    path: Annotated[
        str, Field(min_length=1, max_length=4096, description="File path, absolute or relative to /workspace/agent/")
    ],
    to: To,
    ctx: Context,
    text: Annotated[str | None, Field(max_length=3000, description="Optional accompanying message")] = None,
    filename: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=255,
            description="Display name in chat, or the file's name in an agent's inbox (default: basename of path)",
        ),
    ] = None,
) -> FileQueued:
    result = await call_service(
        nanoclaw_file_send, caller=caller_from_context(ctx), path=path, to=to, text=text, filename=filename
    )
    return FileQueued(**result)


async def edit_message(
    messageId: MessageId,  # noqa: N803 - the seed's parameter name
    text: Annotated[str, Field(min_length=1, max_length=40_000, description="New message content")],
    ctx: Context,
) -> Changed:
    return Changed(**await call_service(message_edit, caller=caller_from_context(ctx), message_id=messageId, text=text))


async def add_reaction(
    messageId: MessageId,  # noqa: N803 - the seed's parameter name
    emoji: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100,
            description="Emoji shortcode (e.g. `thumbs_up`, `heart`), not the raw character",
        ),
    ],
    ctx: Context,
) -> Changed:
    result = await call_service(reaction_add, caller=caller_from_context(ctx), message_id=messageId, emoji=emoji)
    return Changed(messageId=result["messageId"], status=result["status"])


TOOLS = [
    (
        "send_message",
        send_message,
        "Sends a message to a destination in your destination map: a chat (`thread` is this session's own "
        "thread) or another agent, whose session gets it as a queued turn. For mid-turn updates. Returns the "
        "message's numeric id at once. Any other `to` is refused with the list of valid names.",
    ),
    (
        "send_file",
        send_file,
        "Sends a file to a destination in your destination map: a chat (`thread` is this session's own thread), "
        "or another agent, in whose own directory it lands as inbox/<your name>/<filename> (a name already "
        "taken there gets -2, -3 ...: nothing is overwritten), with a message in its inbox naming that path "
        "(a queued turn). The file must be regular, non-empty, at most 100 MiB, inside /workspace/agent/ (your "
        "session directory) or this session's temp directory ($TMPDIR); files count against one limit of 50 per "
        "runner whichever server sent them; a file, name or text containing one of the session's secrets is "
        "refused.",
    ),
    (
        "edit_message",
        edit_message,
        "Replaces the text of a message you sent with send_message, where it went. An edit of a message still "
        "queued applies after it is delivered.",
    ),
    (
        "add_reaction",
        add_reaction,
        "Reacts to a message in one of your threads with a standard emoji's shortcode, not the emoji character: "
        "Slack's names and Unicode's both work (thumbs_up, thumbsup and +1 are one; heart, eyes, tada, rocket, "
        "white_check_mark). A name no standard emoji has is refused with the closest ones.",
    ),
]
