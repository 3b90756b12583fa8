"""A code channel's checkout before a session's first turn, as the session's host reports it
(sessions/code_channel_checkouts.py says when a turn carries one, sessions/host/code_channel.py
does it): recorded as a checkout_repo call of the session, applied or failed, so the thread, the
dashboard and the audit show it like the agent's own calls, and told to the thread's people.

It is Calvin's call, not the agent's: it takes no per-runner slot and is not counted against the
day's tool calls (a refusal there would only lose the record of work already done). The report
is believed only from the host running that turn, about the binding the thread is in now, once
per turn: a host reaches only its own sessions, and never another workspace's binding.
"""

from django.db import transaction
from django.utils import timezone

from calvin.workspaces.code_channel_selectors import code_channel_of_thread
from secrets_vault.services import session_text_redacted
from sessions.code_channel_checkouts import MARK, TOOL, code_channel_checkouts_of
from sessions.models import Turn
from sessions.services import system_notice_post
from tools.changes import tool_call_changed
from tools.models import ToolCall

ENTRY_KEYS = ("name", "full_name", "path", "branch", "commit", "status", "note")
MAX_FIELD = 500
MAX_ERROR = 2000


def _entries(repos) -> list[dict]:
    """What the host says it checked out, as checkout_repo records it: known keys, bounded strings."""
    entries = []
    for entry in repos if isinstance(repos, list) else []:
        if isinstance(entry, dict):
            entries.append(
                {key: entry[key][:MAX_FIELD] if isinstance(entry.get(key), str) else None for key in ENTRY_KEYS}
            )
    return entries[:1]  # one repository is bound: anything more is not this checkout's


@transaction.atomic
def code_channel_checkout_record(*, host_id: int, turn_id: int, report: dict) -> ToolCall | None:
    """Record the host's report of a turn's code channel checkout; None when it is not believed."""
    turn = (
        Turn.objects.select_for_update()
        .select_related("session__thread")
        .filter(id=turn_id, batch_id=turn_id, host_id=host_id, status=Turn.Status.RUNNING)
        .first()
    )
    if turn is None:
        return None
    session, thread = turn.session, turn.session.thread
    binding = code_channel_of_thread(
        workspace_id=session.workspace_id, channel_kind=thread.channel_kind, channel_id=thread.channel_id
    )
    if binding is None or report.get("code_channel") != binding.id:
        return None
    if code_channel_checkouts_of(session.id).filter(payload__turn=turn.id).exists():
        return None  # once per turn, however often a host says it
    ok, repos = report.get("ok") is True, _entries(report.get("repos"))
    ok = ok and bool(repos)
    error = ""
    if not ok:  # the host's git text, which no outbound check has seen
        raw = report.get("error") if isinstance(report.get("error"), str) else ""
        error = session_text_redacted(
            session_id=session.id, workspace_id=session.workspace_id, text=raw[:MAX_ERROR] or "the host gave no reason"
        )
    repository = binding.repository
    call = ToolCall.objects.create(
        session=session,
        runner_id=turn.runner_id,
        tool=TOOL,
        arguments={"repos": [repository.name]},
        payload={MARK: binding.id, "channel": binding.label, "turn": turn.id},
        status=ToolCall.Status.APPLIED if ok else ToolCall.Status.FAILED,
        result={"repos": repos} if ok else None,
        error=error,
        finished_at=timezone.now(),
    )
    tool_call_changed(call, call.status, workspace_id=session.workspace_id, thread_id=thread.id)
    if ok:
        entry = repos[0]
        text = (
            f"Checked out {repository.full_name} on branch {entry['branch']} before the agent's first turn:"
            f" this thread is in the code channel {binding.label}."
        )
    else:
        text = (
            f"Could not check out {repository.full_name} for the code channel {binding.label}:"
            f" {error.rstrip('.')}. The agent was told, and works without it."
        )
    system_notice_post(thread_id=thread.id, text=text)
    return call
