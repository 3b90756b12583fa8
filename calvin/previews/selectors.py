"""Reads of previews. `preview_route` runs on every request to a preview host."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F

from calvin.previews.models import Preview


@dataclass(frozen=True)
class PreviewRoute:
    id: int
    name: str
    session_id: int
    workspace_id: int
    port: int
    host_id: int | None  # the session's host now; None: it has none (the proxy answers 503)
    access: str
    expires_at: datetime | None


_ROUTE_FIELDS = ("id", "name", "session_id", "workspace_id", "port", "host_id", "access", "expires_at")


def preview_route(*, name: str) -> PreviewRoute | None:
    """The live preview of that name, or None (never made, taken down, expired).

    One query through the partial unique index on live names, joined to the session for its host."""
    row = (
        Preview.objects.live()
        .filter(name=name)
        .annotate(host_id=F("session__host_id"))
        .values_list(*_ROUTE_FIELDS)
        .first()
    )
    return PreviewRoute(*row) if row else None


def session_previews_live(*, session_id: int):
    """A session's live previews, newest first (the thread page's panel)."""
    return Preview.objects.live().filter(session_id=session_id).order_by("-created_at", "-id")


def session_preview_ports(*, session_id: int) -> list[int]:
    """The distinct ports a session's live previews publish, sorted (what its host keeps serving)."""
    return Preview.objects.live().filter(session_id=session_id).ports()
