"""Git work in a session's directory, done where that directory lives.

A session on a host: a request over the host's connection (sessions/host/git.py answers it).
A session without one (a runner made with issue_token, its directory on the gateway): the
same host code, run here on the gateway's own event loop, with the gateway's var directory
as its cache. Either way the request waits on the event loop, holding no thread.
"""

from pathlib import Path

from django.conf import settings

from calvin.workspaces.models import Repository
from sessions.git_requests import git_request_base
from tools.caller import Caller
from tools.errors import ToolRefused

# The gateway's own "host" state for sessions whose directory is on the gateway.
GATEWAY_STATE = "gateway-host"


def git_request_fields(*, caller: Caller, repositories: list[Repository]) -> dict:
    """What every git request of the caller's session carries besides its own arguments."""
    return git_request_base(session_id=caller.session_id, workspace_id=caller.workspace_id, repositories=repositories)


def git_wait_seconds(steps: int) -> float:
    """How long to wait for a host doing `steps` network steps (a clone, a fetch), each bounded."""
    return settings.CALVIN_GIT_TIMEOUT_SECONDS * max(1, steps) + 30


async def git_ask(*, caller: Caller, op: str, arguments: dict, wait: float) -> dict:
    """The host's answer to a git request; a refusal or an absent host is a ToolRefused."""
    if caller.host_id is not None:
        from sessions.host_link import HostRefused, HostUnavailable, host_ask

        try:
            return await host_ask(host_id=caller.host_id, op=op, arguments=arguments, timeout=wait)
        except (HostRefused, HostUnavailable) as exc:
            raise ToolRefused(str(exc)) from None
    return await _ask_here(op=op, request=arguments)


async def _ask_here(*, op: str, request: dict) -> dict:
    from sessions.host import git
    from sessions.host.sandbox import Sandbox

    answers: list[dict] = []

    async def collect(message: dict) -> None:
        answers.append(message)

    state_dir = Path(settings.VAR_DIR) / GATEWAY_STATE
    sessions_root = Path(settings.CALVIN_SESSIONS_DIR)
    request = {**request, "op": op, "request": "local"}
    if op == "git.checkout":
        # The session's agent runs outside Calvin, unconfined: nothing to confine the checkout to.
        sandbox = Sandbox.none("this session's agent runs outside Calvin")
        await git.git_checkout_answer(
            request=request, state_dir=state_dir, sessions_root=sessions_root, sandbox=sandbox, send=collect
        )
    else:
        await git.git_brief_answer(request=request, state_dir=state_dir, sessions_root=sessions_root, send=collect)
    answer = answers[-1] if answers else {"ok": False, "error": "the git work gave no answer"}
    if not answer.get("ok"):
        raise ToolRefused(str(answer.get("error") or "the git work failed"))
    return answer
