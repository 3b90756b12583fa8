"""/w/<slug>/tokens/: a person's API tokens for /api/v1/ and `ncl` in this workspace.

Each person makes and revokes their own; owners and admins see and revoke everyone's. A new
token is shown once, on the answer to the POST that made it (never cached, never again)."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from calvin.api.models import ApiToken
from calvin.api.tokens import TokenRefused, api_token_create, api_token_revoke
from calvin.dashboard.selectors import member_for_slug

EXPIRIES = {"": None, "7": 7, "30": 30, "90": 90, "365": 365}  # the form's choices, in days (""=never)


def _page(request, member, *, made=None, token: str = "", problem: str = "", status: int = 200):
    tokens = ApiToken.objects.filter(member__workspace_id=member.workspace_id).select_related("member__user")
    if not member.is_admin:
        tokens = tokens.filter(member=member)
    context = {
        "workspace": member.workspace,
        "me": member,
        "tokens": tokens.order_by("-created_at"),
        "made": made,
        "token": token,
        "problem": problem,
        "now": timezone.now(),
        "api_url": request.build_absolute_uri("/api/v1/"),
    }
    return render(request, "dashboard/api_tokens.html", context, status=status)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_tokens_page(request, slug: str):
    member = member_for_slug(request.user, slug)
    if request.method == "GET":
        return _page(request, member)
    days = request.POST.get("expires", "")
    if days not in EXPIRIES:
        return _page(request, member, problem="Choose an expiry from the list.", status=400)
    expires_at = timezone.now() + timedelta(days=EXPIRIES[days]) if EXPIRIES[days] else None
    try:
        made, token = api_token_create(member=member, name=request.POST.get("name", ""), expires_at=expires_at)
    except TokenRefused as exc:
        return _page(request, member, problem=f"Not made: {exc}.", status=400)
    return _page(request, member, made=made, token=token)


@login_required
@require_POST
def api_token_revoke_view(request, slug: str, token_id: int):
    member = member_for_slug(request.user, slug)
    if not api_token_revoke(token_id=token_id, member=member):
        raise Http404("no such live token of yours")
    messages.success(request, "Revoked: the token no longer works.")
    return redirect("dashboard:api-tokens", slug=slug)
