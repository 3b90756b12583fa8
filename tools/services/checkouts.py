"""checkout_repo (seed 000): workspace repositories checked out in the session directory, each
on the session's branch (a working tree of its own borrowing the host cache's objects).

The names are resolved against the workspace's definition first, every one of them, so one
bad name refuses the whole call before anything is cloned; the git work itself happens on
the session's host (tools/services/git_work.py), and the call is recorded with its outcome.
"""

from django.db import transaction
from django.utils import timezone

from calvin.workspaces.models import Repository
from secrets_vault.services import session_text_redacted
from sessions.git_requests import checkout_request, unpublished
from tools.availability import NO_DEFINITION, definition_needed, host_has_definition
from tools.caller import Caller
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.common import off_loop, refuse_secrets, secret_scanner_for, tool_call_record
from tools.services.git_work import git_ask, git_wait_seconds

TOOL = "checkout_repo"
MAX_REPOS = 10


def unknown(name: str) -> str:
    return f"no repository {name} in this workspace; the list is in AGENTS.md"


def repositories_named(*, workspace_id: int, names: list[str]) -> list[Repository]:
    """The repositories `names` mean (definition name or owner/name, any case), each once, in the
    order first named; every name that is unknown or unpublished is refused, with the seed's texts."""
    by_key = {}
    for repository in Repository.objects.filter(workspace_id=workspace_id):
        by_key[repository.name.lower()] = repository
        by_key[repository.full_name.lower()] = repository
    chosen, problems = [], []
    for name in names:
        repository = by_key.get(name.lower())
        if repository is None:
            problems.append(unknown(name))
        elif not repository.published:
            problems.append(unpublished(name))
        elif repository not in chosen:
            chosen.append(repository)
    if problems:
        raise ToolRefused("; ".join(dict.fromkeys(problems)))
    return chosen


def checkout_plan(*, caller: Caller, repos: list[str]) -> dict:
    """Everything checked before the host is asked: availability, names, secrets."""
    if definition_needed(TOOL) and not host_has_definition(host_id=caller.host_id, workspace_id=caller.workspace_id):
        raise ToolRefused(NO_DEFINITION)
    if not 1 <= len(repos) <= MAX_REPOS:
        raise ToolRefused(f"repos: 1 to {MAX_REPOS} names (got {len(repos)})")
    refuse_secrets(what="a repository name", secrets=secret_scanner_for(caller), content="\n".join(repos))
    repositories = repositories_named(workspace_id=caller.workspace_id, names=repos)
    request = checkout_request(
        session_id=caller.session_id, workspace_id=caller.workspace_id, repositories=repositories
    )
    return {"request": request, "steps": 2 * len(repositories)}


@transaction.atomic
def checkout_record(*, caller: Caller, repos: list[str], result: dict | None, error: str = "") -> ToolCall:
    """The call, counted and audited with its outcome (the work is done: nothing to apply)."""
    call = tool_call_record(
        caller=caller,
        tool=TOOL,
        arguments={"repos": repos},
        payload={},
        secrets=secret_scanner_for(caller),
        status=ToolCall.Status.FAILED if error else ToolCall.Status.APPLIED,
    )
    if error:  # the host's git text, which no outbound check has seen
        error = session_text_redacted(session_id=caller.session_id, workspace_id=caller.workspace_id, text=error)
    ToolCall.objects.filter(id=call.id).update(result=result, error=error, finished_at=timezone.now())
    return call


async def repos_checkout(*, caller: Caller, repos: list[str]) -> dict:
    """Check the repositories out on the session's host; returns each one's path and branch."""
    plan = await off_loop(checkout_plan)(caller=caller, repos=repos)
    try:
        answer = await git_ask(
            caller=caller, op="git.checkout", arguments=plan["request"], wait=git_wait_seconds(plan["steps"])
        )
    except ToolRefused as exc:
        await off_loop(checkout_record)(caller=caller, repos=repos, result=None, error=str(exc))
        raise
    checked_out = [
        {key: entry.get(key) for key in ("name", "full_name", "path", "branch", "commit", "status", "note")}
        for entry in answer.get("repos", [])
    ]
    result = {"repos": checked_out}
    call = await off_loop(checkout_record)(caller=caller, repos=repos, result=result)
    return {"tool_call_id": call.id, **result}
