"""What people do to previews (the thread page, the admin): take one down, change who may open it
and until when. Each checks who may (the session's owner, or an owner or admin of its workspace;
a superuser in the admin), audits the change, and ends previews the one way there is
(tools/services/previews.py, shared with the agent's unpreview)."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from calvin.audit.services import audit_record
from calvin.operators import OperatorRefused, operator_label
from calvin.previews.models import Preview
from calvin.workspaces.models import Member
from tools.services.previews import preview_end, session_previews_push


def preview_may_be_managed_by(preview: Preview, actor) -> bool:
    """The session's owner, an owner or admin of the preview's workspace, or an active superuser."""
    if isinstance(actor, Member):
        return preview.session.may_be_decided_by(actor)
    return bool(getattr(actor, "is_active", False) and getattr(actor, "is_superuser", False))


def _check(preview: Preview, actor) -> None:
    if not preview_may_be_managed_by(preview, actor):
        raise OperatorRefused("only the person who started its session or an owner or admin of its workspace can")


def preview_take_down(*, preview_id: int, actor, via: str | None = None) -> str:
    preview = Preview.objects.select_related("session").get(id=preview_id)
    _check(preview, actor)
    if not preview_end(
        preview_id=preview.id, reason=Preview.Reason.TAKEN_DOWN, actor=actor, by=operator_label(actor), via=via
    ):
        raise OperatorRefused("it had ended already")
    return f"{preview.name} taken down"


@transaction.atomic
def preview_settings_change(
    *, preview_id: int, access: str, expires_at: datetime | None, actor, via: str | None = None
) -> list[str]:
    """Who may open a live preview and until when; returns what changed (nothing: an empty list)."""
    preview = Preview.objects.select_for_update().select_related("session").get(id=preview_id)
    _check(preview, actor)
    if not preview.is_live():
        raise OperatorRefused("it is not live any more")
    if access not in Preview.Access.values:
        raise OperatorRefused(f"access is one of {', '.join(Preview.Access.values)}")
    if expires_at is not None and expires_at <= timezone.now():
        raise OperatorRefused("an expiry is a time to come (take it down to end it now)")
    changes = {}
    if access != preview.access:
        changes["access"] = (preview.access, access)
    if expires_at != preview.expires_at:
        changes["expires_at"] = (
            preview.expires_at.isoformat() if preview.expires_at else None,
            expires_at.isoformat() if expires_at else None,
        )
    if not changes:
        return []
    Preview.objects.filter(id=preview.id).update(access=access, expires_at=expires_at)
    audit_record(
        verb="preview.change", workspace=preview.workspace_id, actor=actor, target=preview, changes=changes, via=via
    )
    session_previews_push(preview.session_id)
    return list(changes)
