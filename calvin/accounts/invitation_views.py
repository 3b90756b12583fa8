"""The page an invitation's link opens: /invite/<token>/ (and /w/<slug>/invite/<token>/).

GET says who invited whom to what, and what to do next: accept (logged in as the invited
address), log out (logged in as someone else), or sign up / log in (logged out). POST accepts.
A link that cannot be used (unknown, replaced, revoked, used, expired, another workspace's)
answers a page saying which, with 404 or 410, and changes nothing.
"""

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from calvin.accounts import invitations
from calvin.accounts.invitations import InvitationRefused
from calvin.accounts.signup import signup_url


def _problem(request, refusal: InvitationRefused):
    return render(
        request,
        "accounts/invitation_problem.html",
        {"problem": str(refusal), "code": refusal.code},
        status=refusal.status,
    )


@never_cache
@require_http_methods(["GET", "POST"])
def invitation_page(request, token: str, slug: str | None = None):
    try:
        invitation = invitations.invitation_for_token(token, workspace_slug=slug)
    except InvitationRefused as refusal:
        return _problem(request, refusal)
    problem = invitations.invitation_state_problem(invitation)
    if problem is not None:
        return _problem(request, problem)
    if request.method == "POST":
        return _accept(request, token, slug)
    here = request.get_full_path()
    context = {
        "invitation": invitation,
        "inviter": invitations.inviter_name(invitation),
        "workspace": invitation.workspace,
        "for_this_person": invitations.is_for(invitation, request.user),
        "logged_in_as": invitations.email_of(request.user) or request.user.get_username(),
        "login_link": reverse("login") + "?" + urlencode({"next": here}),
        # Sign-up keeps `next` through the verification email: the person comes back here, logged in.
        "signup_link": signup_url(next=here, email=invitation.email),
    }
    return render(request, "accounts/invitation.html", context)


def _accept(request, token: str, slug: str | None):
    if not request.user.is_authenticated:
        return redirect(reverse("login") + "?" + urlencode({"next": request.get_full_path()}))
    try:
        outcome = invitations.invitation_accept(raw_token=token, user=request.user, workspace_slug=slug)
    except InvitationRefused as refusal:
        return _problem(request, refusal)
    workspace = outcome.member.workspace
    if outcome.joined:
        messages.success(request, f"Welcome to {workspace.name}: you joined as {outcome.member.role}.")
    else:
        messages.info(request, f"You are already a member of {workspace.name} (as {outcome.member.role}).")
    request.session["calvin_workspace"] = workspace.id
    return redirect("dashboard:workspace", slug=workspace.slug)
