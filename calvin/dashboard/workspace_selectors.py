"""Reads of one workspace's pages: each scoped to the workspace the person's membership names."""

from calvin.chat.models import SlackInstallation
from sessions.models import Thread
from tools.models import ToolCall


def threads_of(workspace, limit: int = 50):
    return Thread.objects.filter(workspace=workspace).select_related("session").order_by("-created_at")[:limit]


def tool_calls_of(workspace, limit: int = 20):
    return (
        ToolCall.objects.filter(session__workspace=workspace).select_related("session__thread").order_by("-id")[:limit]
    )


def slack_installation_of(workspace) -> SlackInstallation | None:
    return SlackInstallation.objects.filter(workspace=workspace).select_related("installed_by").first()
