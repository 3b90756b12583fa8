"""send_file to an agent destination: the file lands in that agent's own directory as
inbox/<from>/<name>, and a message in its session inbox names it.

The copy is made and checked at send time exactly as for a chat (tools/services/files.py: size,
storage quota, secrets, the one per-runner count); the call is recorded as applied (there is no
chat effect) together with the inbox file and the message, all or nothing. The bytes reach the
agent's directory on each host that runs its sessions before their next turn: the turn lists
what that host has not written yet (sessions/turn_messages.py), and the host fetches each file
from the gateway (tools/inbox_views.py) and writes it there (sessions/host/inbox.py).
"""

import os
import unicodedata
from itertools import count

from django.db import transaction

from calvin.workspaces.models import Agent
from sessions.models import Host, Message, Session
from sessions.services import agent_inbox_session, inbox_post
from tools.caller import Caller
from tools.errors import ToolRefused
from tools.models import InboxDelivery, InboxFile, ToolCall
from tools.services.common import tool_call_record
from tools.services.files import CheckedCopy, file_copy_checked, file_copy_discard

# Below the 255 bytes a file system allows a name, so "-2" ... always fits.
MAX_COMPONENT_BYTES = 200
MAX_EXTENSION_CHARS = 16
INBOX = "inbox"


def inbox_component(raw: str, *, fallback: str) -> str:
    """`raw` as one path component that is safe on any host: no slash (or backslash), no NUL or
    other control or format character (a newline, a right-to-left override), no leading dot
    (never `.`, `..` or a hidden file), at most MAX_COMPONENT_BYTES of UTF-8; `fallback` when
    nothing is left."""
    text = raw.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate (undecodable bytes) becomes "?"
    text = "".join("_" if ch in "/\\" or unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text)
    text = text.strip().lstrip(".").strip()
    stem, extension = _split(text)
    return _fit(stem, "", extension) or fallback


def _split(name: str) -> tuple[str, str]:
    """("report", ".txt"); a long or spaced "extension" is part of the stem."""
    stem, extension = os.path.splitext(name)
    if not stem or len(extension) > MAX_EXTENSION_CHARS or " " in extension:
        return name, ""
    return stem, extension


def _fit(stem: str, suffix: str, extension: str) -> str:
    """stem + suffix + extension within MAX_COMPONENT_BYTES, the stem shortened; "" when no stem is left."""
    while stem and len(f"{stem}{suffix}{extension}".encode()) > MAX_COMPONENT_BYTES:
        stem = stem[:-1].rstrip()
    return f"{stem}{suffix}{extension}" if stem else ""


def _free_name(*, agent: Agent, sender: str, name: str) -> str:
    """`name`, or report-2.txt, report-3.txt ... : never a path another file sent to this agent has.
    Run with the agent's row locked, so two sends to it cannot pick the same name."""
    taken = set(InboxFile.objects.filter(agent=agent, sender=sender).values_list("name", flat=True))
    if name not in taken:
        return name
    stem, extension = _split(name)
    for number in count(2):
        candidate = _fit(stem, f"-{number}", extension)
        if candidate not in taken:
            return candidate
    raise AssertionError("unreachable")


def _size_text(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / 1024 / 1024:.1f} MiB"


def inbox_file_send(
    *, caller: Caller, target: Agent, to: str, path: str, text: str | None, filename: str | None, arguments: dict
) -> dict:
    """NanoClaw's send_file with `to` naming an agent: every send_file rule, then the inbox."""
    if target.workspace_id != caller.workspace_id or caller.agent_id is None:
        raise ToolRefused(f"unknown destination {to!r}")  # a map row that points outside the workspace
    if target.provider == Agent.Provider.EXTERNAL:
        raise ToolRefused(
            f"{to} runs outside Calvin (an external agent): no host keeps a directory of it to put a file in;"
            " tell it where the file is with send_message instead"
        )
    # Copied outside any transaction, as for a chat: holding the storage quota's row while up to
    # 100 MiB travel from a host would hold up every other file of the workspace.
    copy = file_copy_checked(caller=caller, path=path, display_name=filename, texts=[text])
    try:
        return inbox_file_record(caller=caller, target=target, to=to, copy=copy, text=text, arguments=arguments)
    except BaseException:
        file_copy_discard(caller=caller, copy=copy, path=path)
        raise


@transaction.atomic
def inbox_file_record(
    *, caller: Caller, target: Agent, to: str, copy: CheckedCopy, text: str | None, arguments: dict
) -> dict:
    """The call (counted, applied: no chat effect), the inbox file under a name no other file
    sent to the agent has, and the message that names it, queued as the agent's turn."""
    Agent.objects.select_for_update().filter(id=target.id).first()  # names are picked one send at a time
    sender_agent = Agent.objects.get(id=caller.agent_id, workspace_id=caller.workspace_id)
    sender = inbox_component(sender_agent.name, fallback=f"agent-{sender_agent.id}")
    name = _free_name(agent=target, sender=sender, name=inbox_component(copy.name, fallback="file"))
    path = f"{INBOX}/{sender}/{name}"
    call = tool_call_record(
        caller=caller,
        tool="send_file",
        server=ToolCall.Server.NANOCLAW,
        arguments=arguments,
        payload={"agent_id": target.id, "inbox_path": path, "size": copy.size, "content_type": copy.content_type},
        file_name=copy.stored,
        secrets=copy.secrets,
        status=ToolCall.Status.APPLIED,
    )
    InboxFile.objects.create(
        workspace_id=caller.workspace_id,
        agent=target,
        tool_call=call,
        sender_agent=sender_agent,
        sender=sender,
        name=name,
        size=copy.size,
        file=copy.stored,
    )
    owner_id = Session.objects.filter(id=caller.session_id).values_list("owner_id", flat=True).first()
    session = agent_inbox_session(agent=target, owner_id=owner_id)
    said = f"Sent you a file: {path} ({_size_text(copy.size)}), in your agent directory ($CALVIN_AGENT_DIR/{path})."
    message = inbox_post(
        session=session,
        text=f"{said}\n\n{text}" if text else said,
        author=Message.Author.AGENT,
        sender_agent=sender_agent,
    )
    Message.objects.filter(id=message.id).update(tool_call=call)
    return {
        "tool_call_id": call.id,
        "to": to,
        "status": "in the agent's inbox",
        "file_name": name,
        "path": path,
        "messageId": message.id,
    }


@transaction.atomic
def inbox_file_delivered(*, host: Host, file: InboxFile) -> None:
    """The host wrote the file into its copy of the agent's directory (or found it there)."""
    InboxDelivery.objects.bulk_create([InboxDelivery(file=file, host=host)], ignore_conflicts=True)
