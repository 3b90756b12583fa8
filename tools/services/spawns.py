"""spawn_thread (seed 000): a session in a new thread, same owner, agent and permission mode.

The brief must be a `.md` file of a repository checked out in the session, present on that
repository's fetched default branch (checked by git on the session's host): the new thread's
agent starts from a fresh checkout, so what it reads is what was pushed, not what lies
uncommitted in the parent's directory. In the web channel the new thread is listed beside
the parent: its first message is the task and the brief, and the parent's thread gets a
notice linking to it.
"""

from django.db import transaction
from django.utils import timezone

from calvin.chat.links import thread_url
from calvin.workspaces.models import Repository
from sessions.models import Message, Session, Thread
from sessions.services import inbox_post, session_start, system_notice_post
from tools.caller import Caller
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
    channel = Thread.objects.filter(id=caller.thread_id).values_list("channel_kind", flat=True).get()
    if channel != Thread.ChannelKind.WEB:
        raise ToolRefused(f"spawn_thread from a {channel} thread needs that channel's adapter on this gateway")
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


@transaction.atomic
def spawn_record(*, caller: Caller, task: str, brief: str, model: str | None, answer: dict) -> dict:
    """Count the call (8 per runner), start the child session and post the two messages."""
    parent = Session.objects.select_related("agent", "owner", "thread").get(id=caller.session_id)
    repository = Repository.objects.filter(workspace_id=caller.workspace_id, name=answer["repository"]).first()
    link = brief_link(answer, repository.clone_url if repository else "")
    call = tool_call_record(
        caller=caller,
        tool=TOOL,
        arguments={"task": task, "brief": brief, "model": model},
        payload={},
        secrets=secret_scanner_for(caller),
        status=ToolCall.Status.APPLIED,  # done here: the new thread is Calvin's own
    )
    child = session_start(
        workspace=parent.workspace,
        owner=parent.owner,
        agent=parent.agent,
        permission_mode=parent.permission_mode,
        title=task,
    )
    child.parent = parent
    child.model = model or parent.model
    child.save(update_fields=["parent", "model"])
    url, parent_url = thread_url(child.thread_id), thread_url(parent.thread_id)
    commit = (answer.get("commit") or "")[:12]
    inbox_post(
        session=child,
        author=Message.Author.AGENT if parent.agent_id else Message.Author.SYSTEM,
        sender_agent=parent.agent,
        text=(
            f"{task}\n\nBrief: {brief} ({link}, commit {commit}). Check out {answer['repository']} with"
            f" checkout_repo and read {brief}.\nSpawned from {parent_url}"
        ),
    )
    system_notice_post(thread_id=parent.thread_id, text=f"Spawned a thread: {task} — {url}")
    result = {"url": url, "thread_id": child.thread_id, "session_id": child.id, "model": child.model}
    ToolCall.objects.filter(id=call.id).update(result=result, finished_at=timezone.now())
    return {"tool_call_id": call.id, **result}


async def thread_spawn(*, caller: Caller, task: str, brief: str, model: str | None) -> dict:
    plan = await off_loop(spawn_plan)(caller=caller, task=task, brief=brief, model=model)
    # Two network steps on the host: ls-remote for the default branch, then the fetch.
    answer = await git_ask(caller=caller, op="git.brief", arguments=plan["request"], wait=git_wait_seconds(2))
    return await off_loop(spawn_record)(caller=caller, task=task, brief=brief, model=model, answer=answer)
