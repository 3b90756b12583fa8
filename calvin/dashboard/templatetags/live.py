"""{% live_streams request "session,turn" %}: the workspace sockets a live page follows (static/dashboard/live.js)."""

from django import template
from django.utils.html import format_html, format_html_join

from calvin.admin_scope import admin_workspace_ids, is_platform_operator

register = template.Library()

# A superuser's admin lists every workspace's rows; beyond this many the page stays as loaded.
MOST_STREAMS = 20


def _admin_workspaces(request) -> list[int]:
    if is_platform_operator(request):
        from calvin.workspaces.models import Workspace

        return list(Workspace.objects.order_by("id").values_list("id", flat=True)[:MOST_STREAMS])
    return admin_workspace_ids(request)[:MOST_STREAMS]


@register.simple_tag
def live_streams(request, kinds: str = "") -> str:
    """One hidden element per workspace the person may use the admin for, and the mark.

    No seq: the admin reads its rows before any template renders, so a seq read here could be
    later than the rows; live.js asks the socket where the stream is and refetches once instead."""
    elements = format_html_join(
        "",
        '<span hidden data-live-stream="/ws/workspaces/{}/" data-live-kinds="{}"></span>',
        ((wid, kinds) for wid in _admin_workspaces(request)),
    )
    if not elements:
        return ""
    return format_html('{}<span class="live-mark" data-live-mark data-state="connecting">connecting…</span>', elements)
