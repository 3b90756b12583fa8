"""A code channel's checkout, done by a session's runner before its agent's first turn there.

The turn carries the same `git.checkout` request checkout_repo sends (sessions/git_requests.py);
it is answered here by the same code (sessions/host/git.py), then the agent is told what happened
in a `[system]` line and the gateway gets the outcome to record (a `turn.checkout` report). A
failure is told, never fatal: the agent runs anyway and may call checkout_repo itself.
"""

import logging
from pathlib import Path

from sessions.host.git import git_checkout_answer
from sessions.host.git_process import redact
from sessions.host.sandbox import Sandbox

log = logging.getLogger("calvin.host")

MAX_SHOWN = 200  # of a label or a name from the turn, in the agent's prompt
MAX_ERROR = 2000
ENTRY_KEYS = ("name", "full_name", "path", "relative_path", "branch", "commit", "status", "note")


def _text(value, limit: int = MAX_SHOWN) -> str:
    return value[:limit] if isinstance(value, str) else ""


async def _answer(spec: dict, *, session_id: int, state_dir: Path | None, sessions_root: Path, sandbox) -> dict:
    """{"ok": True, "repos": [...]} or {"ok": False, "error": ..., "repos": [what was done]}."""
    if "error" in spec:  # the gateway's own refusal (an unpublished repository)
        return {"ok": False, "error": _text(spec["error"], MAX_ERROR) or "the gateway refused it"}
    request = spec.get("request")
    if not isinstance(request, dict) or request.get("session") != session_id:
        return {"ok": False, "error": "the turn's checkout request is not for this session"}
    if state_dir is None:
        return {"ok": False, "error": "this runner has no repository cache on its host"}
    answers: list[dict] = []

    async def collect(message: dict) -> None:
        answers.append(message)

    try:
        await git_checkout_answer(
            request={**request, "op": "git.checkout", "request": "turn"},
            state_dir=state_dir,
            sessions_root=sessions_root,
            sandbox=sandbox,
            send=collect,
        )
    except Exception as error:  # git_checkout_answer answers its own failures; this is a bug's
        log.exception("the code channel checkout of session %s failed", session_id)
        return {"ok": False, "error": redact(f"the host could not do it: {error}")[:MAX_ERROR]}
    answer = answers[-1] if answers else {"ok": False, "error": "the checkout gave no answer"}
    repos = [
        {key: entry.get(key) for key in ENTRY_KEYS} for entry in answer.get("repos") or [] if isinstance(entry, dict)
    ]
    if answer.get("ok") and repos:
        return {"ok": True, "repos": repos}
    return {"ok": False, "error": _text(answer.get("error"), MAX_ERROR) or "the checkout failed", "repos": repos}


def _told(spec: dict, answer: dict) -> str:
    label, repository = _text(spec.get("label")), _text(spec.get("repository"))
    where = f"This thread is in the code channel {label}, bound to {repository}"
    if answer["ok"]:
        entry = answer["repos"][0]
        path = entry.get("relative_path") or entry.get("name")
        already = " (it already was)" if entry.get("status") == "already" else ""
        note = f" Note: {entry['note']}." if entry.get("note") else ""
        return f"{where}: it is checked out at ./{path} on branch {entry.get('branch')}{already}.{note}"
    return (
        f"{where}, but it could not be checked out before this turn: {answer['error']}. "
        f"Call checkout_repo with {_text(spec.get('name'))} if you need it."
    )


async def code_channel_checkout(
    spec, *, session_id: int, state_dir: Path | None, sessions_root: Path, sandbox: Sandbox
) -> tuple[dict, str] | None:
    """The turn's code channel checkout: (the report for the gateway, the line for the agent), or
    None when the turn carries none."""
    if not isinstance(spec, dict):
        return None
    where = {"session_id": session_id, "state_dir": state_dir, "sessions_root": sessions_root, "sandbox": sandbox}
    answer = await _answer(spec, **where)
    report = {"type": "turn.checkout", "code_channel": spec.get("code_channel"), **answer}
    return report, _told(spec, answer)
