"""The dashboard and the web channel: thin views over selectors and services."""

import asyncio
import json

from django.conf import settings
from django.contrib import messages as django_messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseBadRequest, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_POST

from calvin.chat.links import public_base
from calvin.dashboard.actions import ActionRefused, action_press, allow_press
from calvin.dashboard.connect import ConnectRefused, external_runner_issue
from calvin.dashboard.forms import ReplyForm
from calvin.dashboard.live import live_stream_seq, thread_stream
from calvin.dashboard.selectors import (
    member_in,
    memberships_of,
    thread_for,
    thread_header_context,
    thread_messages_page,
)
from calvin.dashboard.workspace_views import LAST_WORKSPACE, workspace_enter
from calvin.previews.views import thread_previews_context
from sessions.models import Message
from sessions.services import message_post_by_person
from sessions.spawn_tree import spawn_tree
from sessions.turns import session_stop


def login_locked_out(request, *args, **kwargs):
    """django-axes' answer once a login is locked out: its username from this address, the username
    from everywhere, or this address for every username (AXES_LOCKOUT_CALLABLE)."""
    minutes = round(settings.AXES_COOLOFF_TIME * 60)  # axes reads the setting as hours
    return render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)


def favicon(request):
    """/favicon.ico, which browsers ask for on their own: the SVG icon, cached for a day."""
    response = redirect(static("dashboard/favicon.svg"))
    response["Cache-Control"] = "public, max-age=86400"
    return response


@login_required
def home(request):
    """`/`: the workspace the person used last, else their first, else the page that creates one."""
    memberships = list(memberships_of(request.user))
    if not memberships:
        return redirect("dashboard:workspace-new")
    last = request.session.get(LAST_WORKSPACE)
    member = next((m for m in memberships if m.workspace_id == last), memberships[0])
    return redirect("dashboard:workspace", slug=member.workspace.slug)


THREAD_PAGE_SIZE = 50


@login_required
def thread_detail(request, thread_id: int):
    """The latest messages, live; ?before=<message id> shows earlier ones (not live)."""
    thread = thread_for(request.user, thread_id)
    workspace_enter(request, member_in(request.user, thread.workspace_id))  # the header names the thread's workspace
    before = request.GET.get("before")
    if before is not None and not (before.isdigit() and len(before) < 19):
        return HttpResponseBadRequest("before must be a message id.")
    before = int(before) if before is not None else None
    # Read before the messages: whatever commits after this read has a higher seq, which the
    # page's socket then catches up (calvin/dashboard/live.py).
    live_seq = live_stream_seq(thread_stream(thread.id))
    # Not `messages`: that name is Django's notices (base.html shows them above every page).
    page, has_earlier = thread_messages_page(thread, before=before, size=THREAD_PAGE_SIZE)
    context = {**thread_header_context(thread), "thread_messages": page, "has_earlier": has_earlier}
    context |= thread_previews_context(session=context["session"], member=member_in(request.user, thread.workspace_id))
    context["spawn_tree"] = spawn_tree(session=context["session"])
    context["live"] = before is None
    context["live_seq"] = live_seq
    return render(request, "chat/thread.html", {**context, "form": ReplyForm()})


@login_required
@require_POST
def thread_reply(request, thread_id: int):
    """A person's reply. Asked for JSON (reply.js), it answers JSON and the message reaches the
    page through the live feed; a plain form post is redirected back to the thread."""
    thread = thread_for(request.user, thread_id)
    wants_json = "application/json" in request.headers.get("Accept", "")
    form = ReplyForm(request.POST)
    if not form.is_valid():
        error = reply_problem(form.data.get("text", ""))
        if wants_json:
            return JsonResponse({"ok": False, "error": error}, status=400)
        return HttpResponseBadRequest(error)
    message = message_post_by_person(
        thread=thread, member=member_in(request.user, thread.workspace_id), text=form.cleaned_data["text"]
    )
    if wants_json:
        return JsonResponse({"ok": True, "message_id": message.id}, status=201)
    return redirect("dashboard:thread", thread_id=thread.id)


def reply_problem(text: str) -> str:
    """Why a reply was refused, in the words its writer needs to fix it."""
    limit = ReplyForm.base_fields["text"].max_length
    if len(text) > limit:
        return f"Not sent: a reply is at most {limit:,} characters (this one has {len(text):,}); your text is kept."
    return "Not sent: write something first."


@login_required
@require_POST
def thread_stop(request, thread_id: int):
    """Stop: the session's owner or a workspace admin ends the agent's whole process tree."""
    thread = thread_for(request.user, thread_id)
    member = member_in(request.user, thread.workspace_id)
    session = thread.session
    if not session.may_be_decided_by(member):
        # The 403 page (templates/403.html) says it in Calvin's look, with a way back.
        raise PermissionDenied("Only the person who started this session or a workspace admin can stop it.")
    outcome = session_stop(session_id=session.id, member=member, via="web")
    django_messages.info(request, f"Stop: {outcome}.")
    return redirect("dashboard:thread", thread_id=thread.id)


@login_required
@require_POST
def thread_connect(request, thread_id: int):
    """An external agent's session: a new runner token, its .mcp.json shown once (never cached)."""
    thread = thread_for(request.user, thread_id)
    try:
        runner, snippet = external_runner_issue(
            session=thread.session,
            member=member_in(request.user, thread.workspace_id),
            base_url=public_base(),
        )
    except ConnectRefused as refusal:
        raise PermissionDenied(str(refusal)) from None
    context = {"thread": thread, "runner": runner, "mcp_json": json.dumps(snippet, indent=2)}
    response = render(request, "chat/connect.html", context)
    response["Cache-Control"] = "no-store"
    return response


async def _read_in_chunks(handle, size: int = 256 * 1024):
    """An async body, so uvicorn streams a 100 MiB file instead of Django buffering it whole."""
    try:
        while chunk := await asyncio.to_thread(handle.read, size):
            yield chunk
    finally:
        handle.close()


@login_required
def message_file(request, thread_id: int, message_id: int):
    thread = thread_for(request.user, thread_id)
    message = get_object_or_404(Message, id=message_id, thread=thread, kind=Message.Kind.FILE)
    try:
        handle = message.file.open("rb")
    except FileNotFoundError:
        raise Http404("file no longer stored") from None
    response = StreamingHttpResponse(
        _read_in_chunks(handle), content_type=message.content_type or "application/octet-stream"
    )
    response["Content-Length"] = str(message.file.size)
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=not message.is_inline_image, filename=message.file_name
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@login_required
@require_POST
def thread_action(request, thread_id: int, action: str, target_id: int):
    """A button pressed on a card in this thread (see calvin/dashboard/actions.py)."""
    thread = thread_for(request.user, thread_id)
    value = request.POST.get("value", "")
    if len(value) > 100:
        return JsonResponse({"ok": False, "text": "that is not one of the card's buttons"}, status=400)
    try:
        text = action_press(
            action=action,
            thread=thread,
            member=member_in(request.user, thread.workspace_id),
            target_id=target_id,
            value=value,
            via="web",
        )
    except ActionRefused as exc:
        return JsonResponse({"ok": False, "text": str(exc)}, status=409)
    return JsonResponse({"ok": True, "text": text})


@login_required
@require_POST
def thread_approval_allow(request, thread_id: int, approval_id: int):
    """A permission prompt's "Allow for this session" / "Allow always for this agent", with the
    Bash command prefix the person chose in the card's form (approvals/rule_services.py)."""
    thread = thread_for(request.user, thread_id)
    value = request.POST.get("value", "")
    if len(value) > 100:
        return JsonResponse({"ok": False, "text": "that is not one of the card's buttons"}, status=400)
    try:
        text = allow_press(
            thread=thread,
            member=member_in(request.user, thread.workspace_id),
            target_id=approval_id,
            value=value,
            prefix=request.POST.get("prefix"),  # None: a rule for a tool other than Bash
            via="web",
        )
    except ActionRefused as exc:
        return JsonResponse({"ok": False, "text": str(exc)}, status=409)
    return JsonResponse({"ok": True, "text": text})
