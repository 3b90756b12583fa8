"""Reads for the dashboard and the web channel, always scoped to the person's workspaces."""

from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth
from django.http import Http404
from django.shortcuts import get_object_or_404

from calvin.workspaces.models import Member
from sessions.models import Message, Thread


def memberships_of(user):
    return Member.objects.filter(user=user).select_related("workspace").order_by("workspace__name")


def threads_visible_to(user):
    return Thread.objects.filter(workspace__members__user=user).select_related("session").order_by("-created_at")


def thread_visible_to(user, thread_id: int) -> bool:
    return user.is_authenticated and Thread.objects.filter(id=thread_id, workspace__members__user=user).exists()


def login_still_valid(session_key: str | None, user_id: int):
    """The user of this login session if it still exists, is theirs and they are active, else None.

    django.contrib.auth.get_user does the checks a request gets: session present, password
    unchanged since login (session auth hash), user still there and active.
    """
    if not session_key:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = auth.get_user(SimpleNamespace(session=store))
    return user if user.is_authenticated and user.pk == user_id else None


def watcher_may_see(session_key: str | None, user_id: int | None, thread_id: int) -> bool:
    """A thread page's socket may (still) watch this thread: logged in as that person, and a member."""
    user = login_still_valid(session_key, user_id) if user_id is not None else None
    return user is not None and thread_visible_to(user, thread_id)


def workspace_watcher_may_see(session_key: str | None, user_id: int | None, workspace_id: int) -> bool:
    """A workspace's live socket (dashboard, admin change lists) may (still) watch it: logged in as
    that person, and a member of it (superusers run every workspace, as in the admin)."""
    user = login_still_valid(session_key, user_id) if user_id is not None else None
    if user is None:
        return False
    return user.is_superuser or Member.objects.filter(user=user, workspace_id=workspace_id).exists()


def thread_messages_page(thread: Thread, *, before: int | None, size: int) -> tuple[list, bool]:
    """The `size` messages before message `before` (or the latest), oldest first, and whether earlier ones exist."""
    query = Message.transcript().filter(thread=thread).select_related("member", "sender_agent")
    query = query.prefetch_related("reactions").order_by("-id")
    if before is not None:
        query = query.filter(id__lt=before)
    page = list(query[: size + 1])
    return page[:size][::-1], len(page) > size


def thread_for(user, thread_id: int) -> Thread:
    return get_object_or_404(threads_visible_to(user), id=thread_id)


def member_for_slug(user, slug: str) -> Member:
    """The person's membership of the workspace a /w/<slug>/ page shows; 404 when they have none
    (another tenant's workspace and no workspace look the same)."""
    if not user.is_authenticated:
        raise Http404("No such workspace")
    return get_object_or_404(Member.objects.select_related("workspace"), user=user, workspace__slug=slug)


def member_in(user, workspace_id: int) -> Member | None:
    return Member.objects.filter(user=user, workspace_id=workspace_id).first()


# --- The thread header (P6): what a person reads at the top of a thread page -------------------

# The header's state in people's words: richer than Session.status, which says "queued" both for
# a session that has nothing to do and for one whose turn waits for a host.
HEADER_STATES = {
    "running": "running",
    "waiting_for_agent": "waiting for your agent",
    "waiting_for_host": "waiting for a host to start it",
    "paused": "paused by an operator",
    "waiting_for_message": "waiting for a message",
    "idle": "idle: the agent answered",
    "finished": "finished",
    "failed": "failed",
}
# Claude Code's permission modes (Session.PermissionMode), as a person reads them.
PERMISSION_WORDS = {
    "default": "asks before it acts",
    "acceptEdits": "edits files without asking",
    "plan": "plans only, changes nothing",
    "bypassPermissions": "acts without asking",
}


def thread_header_state(session, *, external: bool, queued: bool, running_turn) -> str:
    """One key of HEADER_STATES for the session as it is now."""
    if session.status == "running" or running_turn is not None:
        return "running"
    if session.status in ("finished", "failed"):
        return session.status
    if external:  # a person runs it outside Calvin: no host ever claims its turns
        return "waiting_for_agent"
    if queued:
        return "paused" if session.agent and session.agent.paused_at else "waiting_for_host"
    return "idle" if session.status == "idle" else "waiting_for_message"


def external_mcp_json(session) -> str:
    """The .mcp.json an external agent connects with: Calvin's URLs for the agent's tool sets,
    the token as a placeholder (tokens are stored as digests: one is shown only when it is made)."""
    import json

    from calvin.chat.links import public_base
    from sessions.management.commands.issue_token import mcp_json_for

    tool_sets = session.agent.tool_sets if session.agent else None
    return json.dumps(mcp_json_for(url=public_base(), token="<runner token>", tool_sets=tool_sets), indent=2)


def thread_header_context(thread: Thread) -> dict:
    """Everything _thread_header.html shows; the same for every reader (P2 pushes it to all
    open pages), so nothing here depends on who looks."""
    from calvin.workspaces.models import Agent
    from sessions.models import Session, Turn

    session = Session.objects.select_related("agent", "host", "parent__thread", "thread__workspace").get(
        thread_id=thread.id
    )
    agent = session.agent
    external = agent is not None and agent.provider == Agent.Provider.EXTERNAL
    turns = session.turns.filter(status__in=[Turn.Status.RUNNING, Turn.Status.QUEUED])
    running_turn = turns.filter(status=Turn.Status.RUNNING).select_related("host").order_by("id").first()
    queued = turns.filter(status=Turn.Status.QUEUED).exists()
    state = thread_header_state(session, external=external, queued=queued, running_turn=running_turn)
    host = running_turn.host if running_turn and running_turn.host_id else session.host
    return {
        "thread": session.thread,
        "session": session,
        "agent": agent,
        "provider": agent.get_provider_display() if agent else "",
        "external": external,
        "permission_mode": session.permission_mode,
        "permission_words": PERMISSION_WORDS.get(session.permission_mode, session.permission_mode),
        "host": host,
        "state": state,
        "state_words": HEADER_STATES[state],
        "running_turn": running_turn,
        "started_at": running_turn.started_at if running_turn else None,
        "mcp_json": external_mcp_json(session) if external else "",
        # Only a parent of its own workspace (a link edited by hand could lead elsewhere); what it
        # spawned is the page's tree (templates/chat/_spawn_tree.html).
        "parent": session.parent if session.parent and session.parent.workspace_id == session.workspace_id else None,
        "usage": _usage_context(session),  # P4's templates/chat/_usage.html
    }


def _usage_context(session) -> dict:
    from sessions.usage import thread_usage_context

    return thread_usage_context(session)
