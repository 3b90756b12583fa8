"""Rotating the vault key from the admin (superusers only): a page that counts what is sealed
under which key, then, on its POST, re-encrypts every secret and Slack bot token under the first
key of SP_STORE_KEY (the service `manage.py rotate_secrets` calls), with one vault.rotate event."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from calvin.admin_scope import is_platform_operator
from calvin.audit.services import audit_record
from secrets_vault import crypto
from secrets_vault.models import Secret
from secrets_vault.services import secrets_rotate


def vault_sealed_counts() -> dict:
    """How many secrets and Slack bot tokens are sealed under the first key and under older ones."""
    from calvin.chat.models import SlackInstallation

    first = crypto.vault_keys()[0].key_id
    return {
        "first_key_id": first,
        "keys": len(crypto.vault_keys()),
        "secrets_current": Secret.objects.filter(key_id=first).count(),
        "secrets_older": Secret.objects.exclude(key_id=first).count(),
        "tokens_older": SlackInstallation.objects.exclude(bot_token_key_id=first).count(),
    }


@transaction.atomic
def vault_rotate(*, actor) -> int:
    """Re-encrypt everything under the first key; how many rows changed. Superusers only: the
    key is the platform's, shared by every workspace."""
    if not (getattr(actor, "is_active", False) and getattr(actor, "is_superuser", False)):
        raise PermissionDenied("only a superuser rotates the vault key")
    before = vault_sealed_counts()
    changed = secrets_rotate()
    audit_record(
        verb="vault.rotate",
        workspace=None,
        actor=actor,
        changes={
            "key_id": (None, before["first_key_id"]),  # which key, never the key
            "under_older_keys": (before["secrets_older"] + before["tokens_older"], 0),
        },
    )
    return changed


def vault_rotate_view(modeladmin, request):
    if not is_platform_operator(request):
        raise PermissionDenied("only a superuser rotates the vault key")
    if not crypto.vault_available():
        modeladmin.message_user(request, "SP_STORE_KEY is not set: there is no vault key to rotate to.", messages.ERROR)
        return redirect(reverse("admin:secrets_vault_secret_changelist"))
    if request.method == "POST":
        changed = vault_rotate(actor=request.user)
        modeladmin.message_user(
            request,
            f"Vault key rotated: {changed} secret(s) and Slack bot token(s) re-encrypted under key "
            f"{crypto.vault_keys()[0].key_id}. Older keys may now be removed from SP_STORE_KEY.",
            messages.SUCCESS,
        )
        return redirect(reverse("admin:secrets_vault_secret_changelist"))
    context = {
        **modeladmin.admin_site.each_context(request),
        "opts": modeladmin.opts,
        "title": "Rotate the vault key",
        "counts": vault_sealed_counts(),
    }
    return TemplateResponse(request, "admin/secrets_vault/secret/rotate.html", context)
