"""Previews on Calvin's own origin: the members-only login hand-off, and the thread page's
"Take down" and access choices (thin: the services decide)."""

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from calvin.operators import OperatorRefused
from calvin.previews.access import access_token_make, is_member
from calvin.previews.addresses import LABEL_RE, preview_url
from calvin.previews.forms import PreviewSettingsForm
from calvin.previews.models import Preview
from calvin.previews.selectors import preview_route, session_previews_live
from calvin.previews.services import preview_may_be_managed_by, preview_settings_change, preview_take_down
from calvin.workspaces.models import Member

HAND_OFF = "__calvin/access"


def next_path_ok(path: str) -> bool:
    """A path on the preview: one leading slash (never "//host", a backslash or a scheme)."""
    return path.startswith("/") and not path.startswith("//") and "\\" not in path and "\x00" not in path


@login_required
def preview_access(request, name: str):
    """A members-only preview's login: a member of its workspace goes back to it with a
    one-time token (through a page that refreshes to it), which the preview host turns into
    its own cookie."""
    route = preview_route(name=name) if LABEL_RE.fullmatch(name) else None
    if route is None:
        raise Http404("There is no live preview of that name.")
    if not is_member(workspace_id=route.workspace_id, user_id=request.user.pk, cached=False):
        raise PermissionDenied("This preview is open to the members of its workspace only.")
    next_path = request.GET.get("next", "/")
    if not next_path_ok(next_path):
        return HttpResponseBadRequest("next must be a path on the preview, starting with a single /.")
    token = access_token_make(preview_id=route.id, user_id=request.user.pk)
    url = f"{preview_url(name)}{HAND_OFF}?{urlencode({'token': token, 'next': next_path})}"
    # A page that refreshes to the preview, not a redirect (the template says why).
    response = render(request, "previews/access_hand_off.html", {"url": url, "name": name})
    response["Cache-Control"] = "no-store"
    return response


def _preview_for(request, preview_id: int) -> tuple[Preview, Member]:
    """The preview, for a member of its workspace (another tenant's and none look the same: 404)."""
    preview = get_object_or_404(Preview.objects.select_related("session"), id=preview_id)
    member = Member.objects.filter(workspace_id=preview.workspace_id, user=request.user).first()
    if member is None:
        raise Http404("No such preview")
    if not preview_may_be_managed_by(preview, member):
        raise PermissionDenied("Only the person who started this session or a workspace admin can change its previews.")
    return preview, member


@login_required
@require_POST
def preview_take_down_view(request, preview_id: int):
    preview, member = _preview_for(request, preview_id)
    try:
        messages.info(request, f"Preview {preview_take_down(preview_id=preview.id, actor=member, via='web')}.")
    except OperatorRefused as refused:
        messages.error(request, f"Preview {preview.name}: {refused}; nothing changed.")
    return redirect("dashboard:thread", thread_id=preview.session.thread_id)


@login_required
@require_POST
def preview_settings_view(request, preview_id: int):
    preview, member = _preview_for(request, preview_id)
    form = PreviewSettingsForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Choose who may open the preview and until when from the lists.")
    try:
        changed = preview_settings_change(
            preview_id=preview.id,
            access=form.cleaned_data["access"],
            expires_at=form.expires_at(preview.expires_at),
            actor=member,
            via="web",
        )
    except OperatorRefused as refused:
        messages.error(request, f"Preview {preview.name}: {refused}; nothing changed.")
    else:
        said = " and ".join(c.replace("expires_at", "expiry") for c in changed) or "nothing (as it was)"
        messages.info(request, f"Preview {preview.name}: changed {said}.")
    return redirect("dashboard:thread", thread_id=preview.session.thread_id)


def thread_previews_context(*, session, member) -> dict:
    """The thread page's previews panel: every member of the workspace sees the live previews'
    links; the session's owner and the workspace's admins may also take them down and choose
    who may open them."""
    previews = list(session_previews_live(session_id=session.id))
    manage = member is not None and session.may_be_decided_by(member)
    rows = [
        {"preview": p, "url": preview_url(p.name), "form": PreviewSettingsForm(initial={"access": p.access})}
        for p in previews
    ]
    return {"preview_rows": rows, "previews_manage": manage}
