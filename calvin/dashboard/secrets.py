"""Workspace- and agent-level secrets, managed by a workspace's owners and admins.

Anyone else gets a 404, as for a workspace that does not exist. Changes are POSTs with the
CSRF token, answered by a redirect to the list and a message; a value is never in a page,
a redirect or a log (the value is a "sensitive" POST parameter for Django's error reports).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from secrets_vault.crypto import VaultUnavailable
from secrets_vault.forms import SecretNewForm, SecretValueForm
from secrets_vault.management_services import (
    managed_secret,
    manager_in,
    place_name,
    secret_manage_put,
    secret_remove,
    secret_replace,
    secrets_listed,
    vault_problem,
)


def _manager(request, workspace_id: int):
    member = manager_in(request.user, workspace_id)
    if member is None:
        raise Http404("no such workspace")
    return member


def _page(request, member, form, status: int = 200):
    context = {
        "workspace": member.workspace,
        "secrets": secrets_listed([member.workspace_id]),
        "form": form,
        "vault_problem": vault_problem(),
    }
    return render(request, "dashboard/secrets.html", context, status=status)


def _problems(form) -> str:
    return "; ".join(str(error) for errors in form.errors.values() for error in errors)


@login_required
def secret_list(request, workspace_id: int):
    member = _manager(request, workspace_id)
    return _page(request, member, SecretNewForm(workspace_id=workspace_id))


@login_required
@require_POST
@sensitive_post_parameters("value")
def secret_new(request, workspace_id: int):
    member = _manager(request, workspace_id)
    form = SecretNewForm(request.POST, request.FILES, workspace_id=workspace_id)
    if form.is_valid():
        data = form.cleaned_data
        try:
            secret = secret_manage_put(
                workspace_id=workspace_id,
                name=data["name"],
                value=data["value"],
                agent_id=data["agent"].id if data["agent"] else None,
                as_file=data["as_file"],
                member=member,
            )
        except (ValidationError, VaultUnavailable) as exc:
            form.add_error(None, _refusal(exc))
        else:
            messages.success(request, f"{secret.name} is set for {_place(secret)}.")
            return redirect("dashboard:secrets", workspace_id=workspace_id)
    # The form comes back with its problems; its password input never renders the value.
    return _page(request, member, form, status=400)


@login_required
@require_POST
@sensitive_post_parameters("value")
def secret_replace_value(request, workspace_id: int, secret_id: int):
    member = _manager(request, workspace_id)
    secret = managed_secret(workspace_id=workspace_id, secret_id=secret_id)
    if secret is None:
        raise Http404("no such secret")
    form = SecretValueForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            secret_replace(
                secret=secret, value=form.cleaned_data["value"], as_file=form.cleaned_data["as_file"], member=member
            )
        except (ValidationError, VaultUnavailable) as exc:
            form.add_error(None, _refusal(exc))
    if form.errors:
        messages.error(request, f"{secret.name} ({_place(secret)}) was not replaced: {_problems(form)}")
    else:
        messages.success(request, f"{secret.name} ({_place(secret)}) has a new value.")
    return redirect("dashboard:secrets", workspace_id=workspace_id)


@login_required
@require_POST
def secret_delete(request, workspace_id: int, secret_id: int):
    member = _manager(request, workspace_id)
    secret = managed_secret(workspace_id=workspace_id, secret_id=secret_id)
    if secret is None or not secret_remove(secret_id=secret.id, workspace_id=workspace_id, member=member):
        raise Http404("no such secret")
    messages.success(request, f"{secret.name} ({_place(secret)}) is deleted.")
    return redirect("dashboard:secrets", workspace_id=workspace_id)


def _place(secret) -> str:
    return place_name(secret.agent)


def _refusal(exc: Exception) -> str:
    if isinstance(exc, VaultUnavailable):
        return vault_problem() or str(exc)
    return "; ".join(exc.messages)
