"""The vault's services: the only code that sees secret values in the clear."""

from django.db import transaction
from django.db.models import Q

from secrets_vault import crypto
from secrets_vault.models import Secret

REDACTED = "[redacted]"


class SecretInContent(Exception):
    """Outbound content holds the value of one of the session's secrets."""


@transaction.atomic
def secret_set(*, session, name: str, value: str, as_file: bool = False, member=None) -> Secret:
    key_id, ciphertext = crypto.encrypt(
        workspace_id=session.workspace_id, session_id=session.id, name=name, value=value
    )
    return Secret.objects.create(
        workspace_id=session.workspace_id,
        session=session,
        name=name,
        as_file=as_file,
        key_id=key_id,
        ciphertext=ciphertext,
        created_by=member,
    )


@transaction.atomic
def secret_set_for_workspace(*, workspace_id: int, name: str, value: str, as_file: bool = False, member=None) -> Secret:
    """A workspace-wide secret: in scope for every session of the workspace."""
    key_id, ciphertext = crypto.encrypt(workspace_id=workspace_id, session_id=None, name=name, value=value)
    return Secret.objects.create(
        workspace_id=workspace_id, name=name, as_file=as_file, key_id=key_id, ciphertext=ciphertext, created_by=member
    )


def _plain(secret: Secret) -> str:
    return crypto.decrypt(
        workspace_id=secret.workspace_id,
        session_id=secret.session_id,
        name=secret.name,
        key_id=secret.key_id,
        ciphertext=secret.ciphertext,
    )


def session_secret_values(*, session_id: int, workspace_id: int) -> list[str]:
    """The values an outbound check must look for: the session's and the workspace's.

    Fails closed: a secret that cannot be decrypted raises instead of being skipped.
    """
    rows = Secret.objects.filter(workspace_id=workspace_id).filter(Q(session_id=session_id) | Q(session__isnull=True))
    return [value for value in (_plain(s) for s in rows) if value]


def refuse_if_contains_secret(*, values: list[str], content: str) -> None:
    for value in values:
        if value in content:
            raise SecretInContent()


def redact(text: str, values: list[str]) -> str:
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


@transaction.atomic
def secrets_rotate() -> int:
    """Re-encrypt every secret under the first key; returns how many changed."""
    first = crypto.vault_keys()[0].key_id
    changed = 0
    for secret in Secret.objects.select_for_update().exclude(key_id=first):
        key_id, ciphertext = crypto.encrypt(
            workspace_id=secret.workspace_id, session_id=secret.session_id, name=secret.name, value=_plain(secret)
        )
        Secret.objects.filter(id=secret.id).update(key_id=key_id, ciphertext=ciphertext)
        changed += 1
    return changed
