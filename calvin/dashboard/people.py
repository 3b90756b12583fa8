"""/w/<slug>/people/: a workspace's people and open invitations.

Everyone in the workspace sees the list; owners and admins invite, revoke and resend, change
roles and remove people (the rules are calvin/workspaces/people.py's and
calvin/accounts/invitations.py's). Changes are POSTs with the CSRF token answered by a redirect
and a notice; a refusal re-renders the page with the reason and its status. Another
workspace's ids are not found here (404), as is a workspace the person is not in.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from calvin.accounts.invitations import (
    InvitationRefused,
    invitation_create,
    invitation_resend,
    invitation_revoke,
    open_invitations_of,
)
from calvin.dashboard.selectors import member_for_slug
from calvin.workspaces.models import Member
from calvin.workspaces.people import (
    MemberNotFound,
    PeopleRefused,
    member_leave,
    member_remove,
    member_role_change,
    people_of,
    roles_grantable_by,
)
from sessions.usage import people_usage_this_month


def _page(request, member: Member, *, status: int = 200, problem: str = "", email: str = "", role: str = ""):
    workspace = member.workspace
    context = {
        "workspace": workspace,
        "me": member,
        "people": _with_usage(people_of(workspace.id), workspace.id),
        "invitations": open_invitations_of(workspace.id) if member.is_admin else [],
        "role_choices": roles_grantable_by(member),
        "problem": problem,
        "email": email,
        "role": role or Member.Role.MEMBER,
    }
    return render(request, "dashboard/people.html", context, status=status)


def _with_usage(people, workspace_id: int) -> list[Member]:
    used = people_usage_this_month(workspace_id=workspace_id)
    people = list(people)
    for person in people:
        person.month_usage = used.get(person.id)
    return people


def _back(slug: str):
    return redirect(reverse("dashboard:people", kwargs={"slug": slug}))


def _base_url(request) -> str:
    return request.build_absolute_uri("/")


@login_required
def people_page(request, slug: str):
    return _page(request, member_for_slug(request.user, slug))


@login_required
@require_POST
def people_invite(request, slug: str):
    member = member_for_slug(request.user, slug)
    email, role = request.POST.get("email", ""), request.POST.get("role", "")
    try:
        outcome = invitation_create(inviter=member, email=email, role=role, base_url=_base_url(request))
    except InvitationRefused as refusal:
        return _page(request, member, status=refusal.status, problem=str(refusal), email=email[:254], role=role)
    if outcome.status == "already_member":
        messages.info(request, outcome.message)
    else:
        messages.success(request, outcome.message)
    return _back(slug)


@login_required
@require_POST
def invitation_resend_view(request, slug: str, invitation_id: int):
    member = member_for_slug(request.user, slug)
    try:
        outcome = invitation_resend(actor=member, invitation_id=invitation_id, base_url=_base_url(request))
    except InvitationRefused as refusal:
        return _page(request, member, status=refusal.status, problem=str(refusal))
    messages.success(request, f"The invitation to {outcome.invitation.email} is sent again, with a new link.")
    return _back(slug)


@login_required
@require_POST
def invitation_revoke_view(request, slug: str, invitation_id: int):
    member = member_for_slug(request.user, slug)
    try:
        invitation = invitation_revoke(actor=member, invitation_id=invitation_id)
    except InvitationRefused as refusal:
        return _page(request, member, status=refusal.status, problem=str(refusal))
    messages.success(request, f"The invitation to {invitation.email} is revoked: its link no longer works.")
    return _back(slug)


def _people_refusal(request, member: Member, refusal: PeopleRefused):
    status = 404 if isinstance(refusal, MemberNotFound) else 403
    return _page(request, member, status=status, problem=str(refusal))


@login_required
@require_POST
def member_role_view(request, slug: str, member_id: int):
    member = member_for_slug(request.user, slug)
    try:
        changed = member_role_change(actor=member, member_id=member_id, role=request.POST.get("role", ""))
    except PeopleRefused as refusal:
        return _people_refusal(request, member, refusal)
    messages.success(request, f"{changed} is now {changed.role} of {member.workspace.name}.")
    return _back(slug)


@login_required
@require_POST
def member_remove_view(request, slug: str, member_id: int):
    member = member_for_slug(request.user, slug)
    try:
        removed = member_remove(actor=member, member_id=member_id)
    except PeopleRefused as refusal:
        return _people_refusal(request, member, refusal)
    if removed.id == member.id:
        messages.success(request, f"You left {member.workspace.name}.")
        return redirect("dashboard:home")
    messages.success(request, f"{removed} is removed from {member.workspace.name}.")
    return _back(slug)


@login_required
@require_POST
def member_leave_view(request, slug: str):
    member = member_for_slug(request.user, slug)
    try:
        member_leave(member=member)
    except PeopleRefused as refusal:
        return _people_refusal(request, member, refusal)
    messages.success(request, f"You left {member.workspace.name}.")
    return redirect("dashboard:home")
