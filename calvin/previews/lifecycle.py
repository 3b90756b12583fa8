"""When previews end on their own: their session stopped, their host deleted, their expiry passed.

Recorders (calvin/events.py): each runs inside the transaction that stopped the session or
deleted the host, so a preview ends exactly when that change commits, with its audit row.
"""

from calvin.events import HostChanged, SessionStopped, records
from calvin.previews.models import Preview
from tools.services.previews import previews_end


@records(SessionStopped)
def previews_end_with_session(event: SessionStopped) -> None:
    previews_end(
        previews=Preview.objects.filter(session_id=event.session_id),
        reason=Preview.Reason.SESSION_STOPPED,
        by="its session was stopped",
    )


@records(HostChanged)
def previews_end_with_host(event: HostChanged) -> None:
    # Announced before the host's row goes, while its sessions still name it.
    if event.state != "deleted":
        return
    previews_end(
        previews=Preview.objects.filter(session__host_id=event.host_id),
        reason=Preview.Reason.HOST_DELETED,
        by="its host was deleted",
    )


def previews_expired_end(*, now=None) -> int:
    """Mark every preview past its expiry ended (they are not served already), each with its audit row."""
    return previews_end(previews=Preview.objects.expired(now), reason=Preview.Reason.EXPIRED, by="its expiry passed")
