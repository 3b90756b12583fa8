"""spawn_thread (seed 000): a session in a new thread, same owner, agent and permission mode.

The brief must be a `.md` file of a repository checked out in the session, present on that
repository's fetched default branch (checked by git on the session's host): the new thread's
agent starts from a fresh checkout, so what it reads is what was pushed, not what lies
uncommitted in the parent's directory.

Where the new thread goes is the parent's chat adapter's business (ChatAdapter.thread_spawn):
in the web channel a new thread listed beside the parent, at once; in Slack a top-level
message in the parent's channel, which becomes the thread once Slack has taken it, so the
call waits for that (bounded). Then the child session starts with the task as its first
message, and the parent's thread gets a notice linking to the new thread.
"""

import asyncio

from django.db import transaction
from django.utils import timezone

from calvin.chat import chat_adapter_for
from calvin.chat.base import ChatPermanentError, NewThread
from calvin.chat.links import thread_url
from calvin.workspaces.models import Repository
from secrets_vault.services import session_text_redacted
from sessions.models import Message, Session, Thread
from sessions.services import inbox_post, session_start, system_notice_post
from tools.caller import Caller
from tools.changes import tool_call_changed
from tools.errors import ToolRefused
from tools.limits import runner_refuse_if_spent
from tools.models import ToolCall
from tools.services.common import off_loop, refuse_secrets, secret_scanner_for, tool_call_record
from tools.services.git_work import git_ask, git_request_fields, git_wait_seconds
from tools.services.secret_requests import LINE_BREAKS

TOOL = "spawn_thread"
MIN_TASK, MAX_TASK = 3, 150
MODELS = ("smart", "fast", "default")
MAX_BRIEF = 1000
MAX_ANCHOR = 200
# How long the call waits for a platform to make the new thread (Slack: to take the top-level message).
SPAWN_WAIT_SECONDS = 60


def task_problem(task: str) -> str | None:
    if not MIN_TASK <= len(task) <= MAX_TASK:
        return f"task: {MIN_TASK} to {MAX_TASK} characters (got {len(task)})"
    if any(mark in task for mark in LINE_BREAKS):
        return "task: one line (no line breaks)"
    if not task.strip():
        return "task: must not be blank"
    return None


def brief_parts(brief: str) -> tuple[str, str | None]:
    """(path, anchor) of a brief, or a refusal saying which rule it breaks."""
    path, _, anchor = brief.partition("#")
    if len(brief) > MAX_BRIEF:
        raise ToolRefused(f"brief: at most {MAX_BRIEF} characters")
    if not path:
        raise ToolRefused("brief: the path of a .md file in the session directory, e.g. api/docs/plan.md#step-2")
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ToolRefused(
            f"brief {path} must be a path relative to the session directory, without '..', '.' or empty parts"
        )
    if not path.lower().endswith(".md"):
        raise ToolRefused(f"brief {path} must be a .md file")
    if "#" in brief and (not anchor or len(anchor) > MAX_ANCHOR or any(c.isspace() for c in anchor)):
        raise ToolRefused(f"brief: the anchor after '#' is one word of at most {MAX_ANCHOR} characters, no spaces")
    return path, (anchor or None)


def spawn_plan(*, caller: Caller, task: str, brief: str, model: str | None) -> dict:
    """Everything checked before the host is asked: the parameters, the limit, the repository."""
    problem = task_problem(task)
    if problem:
        raise ToolRefused(problem)
    if model is not None and model not in MODELS:
        raise ToolRefused(f"model: one of {', '.join(MODELS)}, or omitted for the parent's model")
    path, anchor = brief_parts(brief)
    refuse_secrets(what="the task or the brief", secrets=secret_scanner_for(caller), content=f"{task}\n{brief}")
    runner_refuse_if_spent(runner_id=caller.runner_id, tool=TOOL)  # before the git work; taken when recorded
    try:  # before the git work: a platform this gateway cannot post to refuses at once
        chat_adapter_for(Thread.objects.only("channel_kind").get(id=caller.thread_id))
    except ChatPermanentError as exc:
        raise ToolRefused(f"no thread can be spawned from this session's thread: {exc}") from None
    first = path.split("/", 1)[0]
    repository = Repository.objects.filter(workspace_id=caller.workspace_id, name=first).first()
    if repository is None or "/" not in path:
        raise ToolRefused(
            f"brief {path} is not inside a repository of this workspace checked out in this session"
            " (check one out with checkout_repo; the list is in AGENTS.md)"
        )
    request = {**git_request_fields(caller=caller, repositories=[repository]), "path": path, "anchor": anchor}
    return {"request": request}


def brief_link(answer: dict, clone_url: str) -> str:
    """A link people can open: the file on the repository's web host when its clone URL is a
    plain https one (GitHub, GitLab and Gitea all serve <repo>/blob/<branch>/<path>)."""
    where = f"{answer['path_in_repo']}" + (f"#{answer['anchor']}" if answer.get("anchor") else "")
    if clone_url.startswith("https://") and "@" not in clone_url.split("/", 3)[2]:
        base = clone_url.removesuffix("/").removesuffix(".git")
        return f"{base}/blob/{answer['default_branch']}/{where}"
    return f"{answer['full_name']}:{where} on {answer['default_branch']}"


def _first_text(*, task: str, brief: str, link: str, answer: dict, parent_url: str) -> str:
    commit = (answer.get("commit") or "")[:12]
    return (
        f"{task}\n\nBrief: {brief} ({link}, commit {commit}). Check out {answer['repository']} with"
        f" checkout_repo and read {brief}.\nSpawned from {parent_url}"
    )


@transaction.atomic
def spawn_record(*, caller: Caller, task: str, brief: str, model: str | None, answer: dict) -> dict:
    """Count the call (8 per runner) and ask the parent's chat adapter for the new thread: made
    at once (web), the child session starts now; made by the platform later (Slack's top-level
    message), it starts in spawn_settle_if_made once the platform answered."""
    parent = Session.objects.select_related("thread").get(id=caller.session_id)
    repository = Repository.objects.filter(workspace_id=caller.workspace_id, name=answer["repository"]).first()
    link = brief_link(answer, repository.clone_url if repository else "")
    text = _first_text(task=task, brief=brief, link=link, answer=answer, parent_url=thread_url(parent.thread_id))
    call = tool_call_record(
        caller=caller,
        tool=TOOL,
        arguments={"task": task, "brief": brief, "model": model},
        payload={"text": text, "model": model or parent.model},
        secrets=secret_scanner_for(caller),
        status=ToolCall.Status.APPLIED,  # done here and by the adapter, not by the effects worker
    )
    try:
        adapter = chat_adapter_for(parent.thread)
        where = adapter.thread_spawn(parent_thread=parent.thread, text=text, tool_call_id=call.id)
    except ChatPermanentError as exc:
        raise ToolRefused(f"no thread was spawned: {exc}") from None
    if where is None:
        return {"tool_call_id": call.id, "pending": True}
    return spawn_settle(tool_call_id=call.id, where=where)


@transaction.atomic
def spawn_settle(*, tool_call_id: int, where: NewThread) -> dict:
    """Start the child session in its new thread: same owner, agent and permission mode, its
    first message the task (a turn for its agent), and a notice in the parent's thread linking
    to it. Once per call: a second settle returns the first one's result."""
    call = ToolCall.objects.select_for_update().select_related("session").get(id=tool_call_id)
    if call.result and call.result.get("session_id"):
        return {"tool_call_id": call.id, **call.result}
    parent, task = call.session, call.arguments["task"]
    child = session_start(
        workspace=parent.workspace,
        owner=parent.owner,
        agent=parent.agent,
        permission_mode=parent.permission_mode,
        title=task,
        channel_kind=where.channel_kind,
        channel_id=where.channel_id,
        thread_ts=where.thread_ts,
    )
    child.parent = parent
    child.model = call.payload["model"]
    child.save(update_fields=["parent", "model"])
    # Written as the parent's agent: never echoed to Slack, where it is the thread's top-level message.
    inbox_post(session=child, author=Message.Author.AGENT, sender_agent=parent.agent, text=call.payload["text"])
    url = where.url or thread_url(child.thread_id)
    system_notice_post(thread_id=parent.thread_id, text=f"Spawned a thread: {task} — {url}")
    result = {"url": url, "thread_id": child.thread_id, "session_id": child.id, "model": child.model}
    ToolCall.objects.filter(id=call.id).update(result=result, finished_at=timezone.now())
    return {"tool_call_id": call.id, **result}


def spawn_settle_if_made(*, tool_call_id: int, withdraw: bool = False) -> dict | None:
    """The spawn's result once its platform made the thread (the child session started then),
    None while it waits; ToolRefused when the platform refused it or it was withdrawn."""
    call = ToolCall.objects.select_related("session__thread").get(id=tool_call_id)
    if call.result and call.result.get("session_id"):
        return {"tool_call_id": call.id, **call.result}
    parent_thread = call.session.thread
    try:
        where = chat_adapter_for(parent_thread).thread_spawned(
            parent_thread=parent_thread, tool_call_id=call.id, withdraw=withdraw
        )
    except ChatPermanentError as exc:
        # The call did nothing: failed, once (Slack's outbox may have failed it already, telling the agent).
        error = session_text_redacted(session_id=call.session_id, workspace_id=call.session.workspace_id, text=str(exc))
        if ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLIED).update(
            status=ToolCall.Status.FAILED, error=error, finished_at=timezone.now()
        ):
            tool_call_changed(call, ToolCall.Status.FAILED)
        raise ToolRefused(f"no thread was spawned: {exc}") from None
    return None if where is None else spawn_settle(tool_call_id=call.id, where=where)


async def _settled(tool_call_id: int) -> dict:
    """Wait (bounded) for the platform to make the thread. At the bound a thread still waiting
    is withdrawn, so no thread appears later without its session; one already on its way
    (Slack may have it) is waited for as long again."""
    loop = asyncio.get_running_loop()
    deadline, withdraw, pause = loop.time() + SPAWN_WAIT_SECONDS, False, 0.01
    while True:
        result = await off_loop(spawn_settle_if_made)(tool_call_id=tool_call_id, withdraw=withdraw)
        if result is not None:
            return result
        now = loop.time()
        if now >= deadline:
            if withdraw:
                raise ToolRefused(
                    f"the new thread's first message was still being sent after {2 * SPAWN_WAIT_SECONDS} s (call"
                    f" {tool_call_id}); if it arrives, its thread has no session: spawn again"
                )
            deadline, withdraw = now + SPAWN_WAIT_SECONDS, True
            continue
        await asyncio.sleep(min(pause, deadline - now))
        pause = min(pause * 2, 0.25)


async def thread_spawn(*, caller: Caller, task: str, brief: str, model: str | None) -> dict:
    plan = await off_loop(spawn_plan)(caller=caller, task=task, brief=brief, model=model)
    # Two network steps on the host: ls-remote for the default branch, then the fetch.
    answer = await git_ask(caller=caller, op="git.brief", arguments=plan["request"], wait=git_wait_seconds(2))
    result = await off_loop(spawn_record)(caller=caller, task=task, brief=brief, model=model, answer=answer)
    if result.get("pending"):
        result = await _settled(result["tool_call_id"])
    return result
