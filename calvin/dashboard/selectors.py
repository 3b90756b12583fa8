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
