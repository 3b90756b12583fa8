"""Reads for the dashboard and the web channel, always scoped to the person's workspaces."""

from django.shortcuts import get_object_or_404

from calvin.workspaces.models import Member
from sessions.models import Thread
from tools.models import ToolCall


def memberships_of(user):
    return Member.objects.filter(user=user).select_related("workspace").order_by("workspace__name")


def threads_visible_to(user):
    return Thread.objects.filter(workspace__members__user=user).select_related("session").order_by("-created_at")


def thread_visible_to(user, thread_id: int) -> bool:
    return user.is_authenticated and Thread.objects.filter(id=thread_id, workspace__members__user=user).exists()


def thread_for(user, thread_id: int) -> Thread:
    return get_object_or_404(threads_visible_to(user), id=thread_id)


def member_in(user, workspace_id: int) -> Member | None:
    return Member.objects.filter(user=user, workspace_id=workspace_id).first()


def recent_tool_calls_for(user, limit: int = 20):
    return (
        ToolCall.objects.filter(session__workspace__members__user=user)
        .select_related("session__thread")
        .order_by("-id")[:limit]
    )
