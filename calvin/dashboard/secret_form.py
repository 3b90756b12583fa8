"""request_secret's private form: the value is typed here, never in the thread.

Only the session's owner or a workspace owner/admin gets the form; anyone else who can
see the thread is refused and nothing is stored. The value is write-only: a password
field, never echoed, and after a successful POST the browser is redirected to a page
that only says who set it.
"""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables

from calvin.dashboard.selectors import member_in, thread_for
from secrets_vault.forms import uploaded_value
from secrets_vault.models import MAX_VALUE_BYTES, SecretRequest
from secrets_vault.requests import (
    WHO_MAY_SET,
    SecretRequestRefused,
    secret_request_fulfil,
    secret_request_may_set,
)

MAX_KIB = MAX_VALUE_BYTES // 1024


class ValueProblem(Exception):
    def __init__(self, text: str, status: int):
        super().__init__(text)
        self.status = status


@sensitive_variables("value")
def _submitted_value(request) -> str:
    """The typed value, or the uploaded file's text (a file secret may be a key file)."""
    upload = request.FILES.get("file")
    if upload is not None and upload.size:
        try:
            return uploaded_value(upload)
        except ValidationError as exc:
            status = 413 if exc.code == "too_large" else 400
            raise ValueProblem(f"{exc.messages[0]}; nothing was stored", status) from None
    value = request.POST.get("value", "")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_VALUE_BYTES:
        raise ValueProblem(f"the value is larger than {MAX_KIB} KiB; nothing was stored", 413)
    return value


@never_cache
@sensitive_post_parameters("value")
@sensitive_variables("value")
@login_required
def secret_form(request, thread_id: int, request_id: int):
    thread = thread_for(request.user, thread_id)
    secret_request = get_object_or_404(
        SecretRequest.objects.select_related("session__agent", "set_by"), pk=request_id, session__thread_id=thread.id
    )
    session = secret_request.session
    context = {
        "thread": thread,
        "secret_request": secret_request,
        "agent_name": session.agent.name if session.agent_id else "(no agent)",
        "max_kib": MAX_KIB,
        "state": secret_request.status,
    }
    member = member_in(request.user, thread.workspace_id)
    if not secret_request_may_set(member=member, session=session):
        return render(
            request, "chat/secret_form.html", {**context, "state": "refused", "refusal": WHO_MAY_SET}, status=403
        )
    if request.method == "POST":
        try:
            value = _submitted_value(request)
            secret_request_fulfil(request_id=secret_request.pk, thread_id=thread.id, member=member, value=value)
        except ValueProblem as exc:
            return render(request, "chat/secret_form.html", {**context, "problem": str(exc)}, status=exc.status)
        except SecretRequestRefused as exc:
            secret_request.refresh_from_db()
            context["state"] = secret_request.status
            return render(request, "chat/secret_form.html", {**context, "problem": str(exc)}, status=409)
        return redirect("dashboard:secret-form", thread_id=thread.id, request_id=secret_request.pk)
    if request.method != "GET":
        return render(request, "chat/secret_form.html", context, status=405)
    return render(request, "chat/secret_form.html", context)
