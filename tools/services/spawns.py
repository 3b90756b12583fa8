"""spawn_thread (seed 000): a session in a new thread, same owner, agent and permission mode.

The brief must be a `.md` file of a repository checked out in the session, present on that
repository's fetched default branch (checked by git on the session's host): the new thread's
agent starts from a fresh checkout, so what it reads is what was pushed, not what lies
uncommitted in the parent's directory.

Where the new thread goes is the parent's chat adapter's business (ChatAdapter.thread_spawn):
in the web channel a new thread listed beside the parent, at once; in Slack a top-level
message in the parent's channel, which becomes the thread once Slack has taken it, so the
call waits for that (bounded). Then the child session starts with the task as its first
message, and the parent's thread gets a notice linking to the new thread. From a code channel
the seed posts in the owner's direct messages instead (spawn_destination): opened before the
call is recorded; where there are none (the web channel, an owner without a Slack id) the
thread goes where it would have gone, and the result's note says so.

Spawning is bounded per workspace (Quota): how many levels below its root a spawned thread may
be, and how many spawned threads under one root may be alive at once, so agents that spawn
agents that spawn agents cannot run away with the workspace's hosts and money.
"""

import asyncio
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from calvin.chat import chat_adapter_for
from calvin.chat.base import ChatPermanentError, ChatTemporaryError, NewThread
from calvin.chat.links import thread_url
from calvin.workspaces.code_channel_selectors import code_channel_of_thread
from calvin.workspaces.models import Quota, Repository
from secrets_vault.services import session_text_redacted
from sessions.models import Message, Session, Thread
from sessions.services import inbox_post, session_start, system_notice_post
from sessions.spawn_tree import LIVE_STATUSES, spawn_lineage, spawn_tree_ids
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


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def spawn_limits_refuse_if_over(*, caller: Caller, lock: bool) -> None:
    """Refuse a spawn past the workspace's bounds on its tree of spawned threads: the new thread
    at most `spawn_depth_max` levels below its root, and fewer than `spawn_live_descendants_max`
    spawned threads under that root alive, counting spawns whose platform is still making the
    thread (else two quick calls pass the limit together). With `lock` (inside the recording
    transaction) the root's row is locked before counting, so spawns under one root count one
    after the other and two at the limit never both pass."""
    root_id, level = spawn_lineage(session_id=caller.session_id, workspace_id=caller.workspace_id)
    limits = ("spawn_depth_max", "spawn_live_descendants_max")
    quota = Quota.objects.filter(workspace_id=caller.workspace_id).only(*limits).first() or Quota()
    depth_max, live_max = quota.spawn_depth_max, quota.spawn_live_descendants_max
    if level + 1 > depth_max:
        here = f"this thread is {_plural(level, 'level')} below its root, and " if level else ""
        allowed = f"{_plural(depth_max, 'level')} of spawned threads" if depth_max else "no spawned threads"
        raise ToolRefused(
            f"no thread was spawned: {here}this workspace allows {allowed} (Quota: spawn depth max"
            f" {depth_max}). Do the work in this thread, or ask a workspace admin to raise the limit."
        )
    if lock:  # the row is not needed, its lock is: a second spawn under this root waits here
        list(Session.objects.select_for_update().filter(id=root_id).values_list("id", flat=True))
    tree = spawn_tree_ids(root_id=root_id, workspace_id=caller.workspace_id)
    live = Session.objects.filter(id__in=tree, status__in=LIVE_STATUSES).exclude(id=root_id).count()
    # A call waits at most twice SPAWN_WAIT_SECONDS for its thread; one unsettled well past that
    # was given up by its agent (told to spawn again), and its place is free.
    being_made = ToolCall.objects.filter(
        session_id__in=tree,
        tool=TOOL,
        status=ToolCall.Status.APPLIED,
        finished_at__isnull=True,
        created_at__gte=timezone.now() - timedelta(seconds=3 * SPAWN_WAIT_SECONDS),
    ).count()
    alive = live + being_made
    if alive >= live_max:
        making = f", {being_made} of them still being made" if being_made else ""
        raise ToolRefused(
            f"no thread was spawned: {_plural(alive, 'spawned thread')} under this thread's root"
            f" {'is' if alive == 1 else 'are'} still alive (waiting to start or running{making}), and"
            f" this workspace allows {live_max} at once (Quota: spawn live descendants max {live_max}). Wait"
            " until one has answered or is stopped, or ask a workspace admin to raise the limit."
        )


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
    spawn_limits_refuse_if_over(caller=caller, lock=False)  # before the git work; again, locked, when recorded
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


def spawn_destination(*, caller: Caller) -> dict:
    """Where the new thread's first message goes: {"channel_id": the owner's direct messages, or ""
    for the parent's channel; "note": what the agent is told about it, "" for the ordinary case}."""
    sessions = Session.objects.select_related("thread", "owner")
    parent = sessions.get(id=caller.session_id, workspace_id=caller.workspace_id)
    thread = parent.thread
    binding = code_channel_of_thread(
        workspace_id=caller.workspace_id, channel_kind=thread.channel_kind, channel_id=thread.channel_id
    )
    if binding is None:
        return {"channel_id": "", "note": ""}
    here = f"this thread is in the code channel {binding.label}"
    try:
        if parent.owner is None:
            raise ChatPermanentError("this session has no owner")
        channel = chat_adapter_for(thread).direct_channel_open(workspace_id=caller.workspace_id, member=parent.owner)
    except ChatPermanentError as exc:
        instead = "it was started in this thread's channel instead"
        note = f"{here}, so the new thread belongs in its owner's direct messages, but {exc}: {instead}"
        return {"channel_id": "", "note": note}
    except ChatTemporaryError as exc:
        raise ToolRefused(
            f"no thread was spawned: {here}, and its owner's direct messages could not be opened now ({exc});"
            " try again in a moment"
        ) from None
    return {"channel_id": channel, "note": f"{here}: the new thread was started in its owner's direct messages"}


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
def spawn_record(
    *, caller: Caller, task: str, brief: str, model: str | None, answer: dict, destination: dict | None = None
) -> dict:
    """Count the call (8 per runner) and ask the parent's chat adapter for the new thread: made
    at once (web), the child session starts now; made by the platform later (Slack's top-level
    message), it starts in spawn_settle_if_made once the platform answered. `destination`:
    spawn_destination's answer (the owner's direct messages from a code channel)."""
    destination = destination or {"channel_id": "", "note": ""}
    spawn_limits_refuse_if_over(caller=caller, lock=True)
    parent = Session.objects.select_related("thread").get(id=caller.session_id)
    repository = Repository.objects.filter(workspace_id=caller.workspace_id, name=answer["repository"]).first()
    link = brief_link(answer, repository.clone_url if repository else "")
    text = _first_text(task=task, brief=brief, link=link, answer=answer, parent_url=thread_url(parent.thread_id))
    call = tool_call_record(
        caller=caller,
        tool=TOOL,
        arguments={"task": task, "brief": brief, "model": model},
        payload={
            "text": text,
            "model": model or parent.model,
            "note": destination["note"],
            "direct": bool(destination["channel_id"]),
        },
        secrets=secret_scanner_for(caller),
        status=ToolCall.Status.APPLIED,  # done here and by the adapter, not by the effects worker
    )
    try:
        adapter = chat_adapter_for(parent.thread)
        where = adapter.thread_spawn(
            parent_thread=parent.thread, text=text, tool_call_id=call.id, channel_id=destination["channel_id"]
        )
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
    where_said = " in the owner's direct messages" if call.payload.get("direct") else ""
    system_notice_post(thread_id=parent.thread_id, text=f"Spawned a thread{where_said}: {task} — {url}")
    result = {"url": url, "thread_id": child.thread_id, "session_id": child.id, "model": child.model}
    if call.payload.get("note"):
        result["note"] = call.payload["note"]
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
    destination = await off_loop(spawn_destination)(caller=caller)  # Slack's conversations.open: outside the record
    result = await off_loop(spawn_record)(
        caller=caller, task=task, brief=brief, model=model, answer=answer, destination=destination
    )
    if result.get("pending"):
        result = await _settled(result["tool_call_id"])
    return result
