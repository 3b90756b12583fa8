"""NanoClaw's send_file(path, to, text, filename): the one file service, to a chat destination or
into another agent's inbox (tools/services/inbox_files.py)."""

from tools.caller import Caller
from tools.errors import ToolRefused
from tools.services.destinations import destination_resolve
from tools.services.files import file_send
from tools.services.inbox_files import inbox_file_send

# NanoClaw's agents know their directory as /workspace/agent/; in Calvin that is the session directory.
NANOCLAW_AGENT_DIR = "/workspace/agent"


def session_relative(path: str) -> str:
    """/workspace/agent/x -> x (relative to the session directory); any other path as given."""
    if path == NANOCLAW_AGENT_DIR or path.startswith(NANOCLAW_AGENT_DIR + "/"):
        return path[len(NANOCLAW_AGENT_DIR) :].lstrip("/") or "."
    return path


def _display_name(filename: str) -> str:
    name = filename.strip()
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ToolRefused("filename is a display name: no slashes, not empty, not . or ..")
    return name


def nanoclaw_file_send(*, caller: Caller, path: str, to: str, text: str | None, filename: str | None) -> dict:
    destination = destination_resolve(caller=caller, to=to)
    name = _display_name(filename) if filename is not None else None
    arguments = {"path": path, "to": to, "text": text, "filename": filename}
    if destination.agent is not None:
        return inbox_file_send(
            caller=caller,
            target=destination.agent,
            to=destination.name,
            path=session_relative(path),
            text=text,
            filename=name,
            arguments=arguments,
        )
    result = file_send(
        caller=caller,
        path=session_relative(path),
        post={"comment": text, "title": None, "alt_text": None},
        arguments=arguments,
        server="nanoclaw",
        thread_id=destination.thread_id,
        display_name=name,
    )
    return {
        "tool_call_id": result["tool_call_id"],
        "to": destination.name,
        "status": result["status"],
        "file_name": result["file_name"],
    }
