"""A person's workspaces: create one, its home (/w/<slug>/), its settings with Slack. Thin: the
rules are in calvin.workspaces.services, the reads in workspace_selectors."""

from django.conf import settings
from django.contrib import messages as django_messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from approvals.policy import approval_session_owner_decides
from approvals.services import approval_may_decide
from calvin.chat.slack.inbound import workspace_slack_uninstall
from calvin.chat.slack.installations import one_team_mode, slack_setup_lines
from calvin.chat.slack.oauth import oauth_configured
from calvin.dashboard.live import live_stream_seq, workspace_stream
from calvin.dashboard.selectors import member_for_slug
from calvin.dashboard.workspace_forms import (
    SessionStartForm,
    WorkspaceCreateForm,
    WorkspaceDecidersForm,
    WorkspaceRenameForm,
)
from calvin.dashboard.workspace_selectors import (
    STATES,
    SessionFilters,
    filter_choices,
    hosts_of,
    open_questions_of,
    pending_approvals_of,
    session_state_counts,
    sessions_page,
    slack_installation_of,
    tool_calls_of,
    usage_meters,
    waiting_secret_requests_of,
)
from calvin.workspaces.code_channel_rules import space_channel_id
from calvin.workspaces.code_channel_selectors import web_spaces_of
from calvin.workspaces.services import (
    WorkspaceRefused,
    owned_workspace_count,
    workspace_create,
    workspace_rename,
    workspace_self_modification_deciders_set,
)
from secrets_vault.crypto import vault_available
from sessions.services import session_start

# The session key `/` reads to take a person back to the workspace they used last.
LAST_WORKSPACE = "calvin_workspace"
SLACK_OAUTH_SETTINGS = ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SLACK_SIGNING_SECRET")
ADMINS_ONLY = "Only the workspace's owners and admins change its settings."


def workspace_enter(request, member):
    """The page shows this member's workspace: the header names it, and `/` comes back to it."""
    request.current_member = member
    if request.session.get(LAST_WORKSPACE) != member.workspace_id:
        request.session[LAST_WORKSPACE] = member.workspace_id


@login_required
@require_http_methods(["GET", "POST"])
def workspace_new(request):
    form = WorkspaceCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            workspace = workspace_create(owner_user=request.user, **form.cleaned_data)
        except WorkspaceRefused as refused:
            form.add_error(refused.field, str(refused))
        else:
            django_messages.success(request, f"Workspace {workspace.name} created: you are its owner.")
            return redirect("dashboard:workspace", slug=workspace.slug)
    limit = settings.CALVIN_WORKSPACES_PER_PERSON
    context = {"form": form, "limit": limit, "at_limit": owned_workspace_count(request.user) >= limit}
    return render(request, "dashboard/workspace_new.html", context, status=400 if form.errors else 200)


# The home page's session states in words, with the statuses each gathers.
STATE_WORDS = {
    "running": "running",
    "waiting": "waiting for a person",
    "agent": "waiting for your agent",
    "queued": "queued",
    "idle": "idle",
    "stopped": "stopped",
}


@login_required
def workspace_home(request, slug: str):
    """Sessions by state (filtered, searched, paged), what waits for a person, hosts and today's use.
    Its panels are marked data-live-panel: live.js refetches this page and swaps them on events."""
    member = member_for_slug(request.user, slug)
    workspace_enter(request, member)
    workspace = member.workspace
    live_seq = live_stream_seq(workspace_stream(workspace.id))  # before the reads: later events catch up
    filters = SessionFilters.from_query(request.GET, workspace)
    page = sessions_page(workspace, filters, request.GET.get("page"))
    counts = session_state_counts(workspace)
    approvals = list(pending_approvals_of(workspace))
    questions = list(open_questions_of(workspace))
    for item in approvals:
        item.may_decide = approval_may_decide(member=member, approval=item)
        item.admins_only = not approval_session_owner_decides(item)
    for item in questions:
        item.may_decide = item.tool_call.session.may_be_decided_by(member)
    for session in page:
        session.state_words = STATE_WORDS[session.state]
    secret_requests = list(waiting_secret_requests_of(workspace))
    context = {
        "member": member,
        "workspace": workspace,
        "form": SessionStartForm(spaces=web_spaces_of(workspace_id=workspace.id)),
        "live_seq": live_seq,
        "filters": filters,
        "filter_query": urlencode(filters.as_query()),
        "states": [(state, STATE_WORDS[state], counts[state]) for state in STATES],
        "counts": counts,
        "page": page,
        "approvals": approvals,
        "questions": questions,
        "secret_requests": secret_requests,
        "waiting_total": len(approvals) + len(questions) + len(secret_requests),
        "hosts": hosts_of(workspace),
        "meters": usage_meters(workspace),
        "tool_calls": tool_calls_of(workspace),
        **filter_choices(workspace),
    }
    return render(request, "dashboard/home.html", context)


@login_required
@require_POST
def workspace_session_start(request, slug: str):
    member = member_for_slug(request.user, slug)
    form = SessionStartForm(request.POST, spaces=web_spaces_of(workspace_id=member.workspace_id))
    if not form.is_valid():
        if "space" in form.errors:
            return HttpResponseBadRequest("That code channel is not one of this workspace's: reload and choose again.")
        return HttpResponseBadRequest("Write what the agent should do (at most 40,000 characters).")
    # A thread in a space is a web thread whose channel names it (calvin/workspaces/code_channel_rules.py).
    space = form.cleaned_data.get("space")
    channel_id = space_channel_id(space) if space else "web"
    session = session_start(
        workspace=member.workspace, owner=member, prompt=form.cleaned_data["prompt"], channel_id=channel_id
    )
    return redirect("dashboard:thread", thread_id=session.thread_id)


def _slack_context(request, workspace) -> dict:
    base = settings.CALVIN_PUBLIC_URL.rstrip("/") or request.build_absolute_uri("/").rstrip("/")
    return {
        "installation": slack_installation_of(workspace),
        "oauth_configured": oauth_configured(),
        "one_team_mode": one_team_mode(),
        "missing": [name for name in SLACK_OAUTH_SETTINGS if not getattr(settings, name)],
        "vault_available": vault_available(),
        "install_url": f"{reverse('slack:install')}?workspace={workspace.slug}",
        "setup_lines": slack_setup_lines(base),
    }


@login_required
@require_http_methods(["GET", "POST"])
def workspace_settings(request, slug: str):
    """Owners and admins rename the workspace; members see the page read-only (a POST of theirs is 403)."""
    member = member_for_slug(request.user, slug)
    workspace_enter(request, member)
    if request.method == "POST" and not member.is_admin:
        return HttpResponseForbidden(ADMINS_ONLY)
    form = WorkspaceRenameForm(request.POST or None, initial={"name": member.workspace.name})
    if request.method == "POST" and form.is_valid():
        try:
            changed = workspace_rename(member=member, name=form.cleaned_data["name"])
        except WorkspaceRefused as refused:
            form.add_error(refused.field, str(refused))
        else:
            django_messages.success(request, "Name saved." if changed else "The name is unchanged.")
            return redirect("dashboard:workspace-settings", slug=slug)
    return _settings_page(request, member, form=form)


def _settings_page(request, member, *, form=None, deciders_form=None):
    workspace = member.workspace
    context = {
        "member": member,
        "workspace": workspace,
        "form": form or WorkspaceRenameForm(initial={"name": workspace.name}),
        "deciders_form": deciders_form
        or WorkspaceDecidersForm(initial={"self_modification_deciders": workspace.self_modification_deciders}),
        "admins_only": ADMINS_ONLY,
    }
    context |= _slack_context(request, workspace)
    errors = context["form"].errors or context["deciders_form"].errors
    return render(request, "dashboard/workspace_settings.html", context, status=400 if errors else 200)


@login_required
@require_POST
def workspace_settings_approvals(request, slug: str):
    """Owners and admins choose who approves an agent's changes to itself."""
    member = member_for_slug(request.user, slug)
    workspace_enter(request, member)
    if not member.is_admin:
        return HttpResponseForbidden(ADMINS_ONLY)
    form = WorkspaceDecidersForm(request.POST)
    if form.is_valid():
        try:
            changed = workspace_self_modification_deciders_set(
                member=member, deciders=form.cleaned_data["self_modification_deciders"]
            )
        except WorkspaceRefused as refused:
            form.add_error(refused.field, str(refused))
        else:
            said = "saved" if changed else "unchanged"
            django_messages.success(request, f"Who approves an agent's changes to itself: {said}.")
            return redirect("dashboard:workspace-settings", slug=slug)
    return _settings_page(request, member, deciders_form=form)


@login_required
@require_http_methods(["GET", "POST"])
def workspace_slack_disconnect(request, slug: str):
    """GET: what Uninstall will do, and a button; POST: do it (owners and admins)."""
    member = member_for_slug(request.user, slug)
    workspace_enter(request, member)
    if not member.is_admin:
        return HttpResponseForbidden(ADMINS_ONLY)
    installation = slack_installation_of(member.workspace)
    if request.method == "GET":
        if installation is None:
            django_messages.info(request, "This workspace is not connected to Slack.")
            return redirect("dashboard:workspace-settings", slug=slug)
        context = {"member": member, "workspace": member.workspace, "installation": installation}
        return render(request, "dashboard/slack_uninstall.html", context)
    try:
        team = workspace_slack_uninstall(member=member, team_id=request.POST.get("team_id", "")[:32])
    except WorkspaceRefused as refused:
        django_messages.error(request, f"Uninstall: {refused}.")
    else:
        django_messages.success(request, f"Calvin is no longer connected to the Slack team {team}.")
    return redirect("dashboard:workspace-settings", slug=slug)
