"""The vault's services: the only code that sees secret values in the clear.

A secret lives at one of three places: the workspace (every session), an agent (its
sessions), or one session (set through request_secret). A session's secrets are all three,
the nearer place winning when names collide: session over agent over workspace.
"""

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from secrets_vault import crypto
from secrets_vault.models import MAX_VALUE_BYTES, Secret, validate_secret_name
from secrets_vault.redaction import REDACTED, redact_text, remember_values
from secrets_vault.scanner import scanner_for

# Outbound content holding a value is refused: a value of 1 or 2 characters would refuse
# nearly every message the agent sends (and redact most log lines).
MIN_VALUE_CHARS = 6
PRECEDENCE = {Secret.Scope.WORKSPACE: 0, Secret.Scope.AGENT: 1, Secret.Scope.SESSION: 2}


def secret_value_problem(value) -> str | None:
    """Why a value cannot be stored, or None."""
    if not isinstance(value, str) or not value:
        return "the value is empty"
    if len(value) < MIN_VALUE_CHARS:
        return (
            f"the value is shorter than {MIN_VALUE_CHARS} characters: every outbound message containing it would be"
            " refused"
        )
    try:
        size = len(value.encode())
    except UnicodeEncodeError:  # JSON can carry a lone surrogate ("\ud800"); no file or environment can
        return "the value is not valid Unicode text (it holds a lone surrogate)"
    if size > MAX_VALUE_BYTES:
        return f"the value is larger than {MAX_VALUE_BYTES // 1024} KiB"
    if "\x00" in value:
        return "the value contains a NUL character (an environment variable cannot hold one)"
    return None


@transaction.atomic
def secret_put(
    *,
    workspace_id: int,
    name: str,
    value: str,
    agent_id: int | None = None,
    session_id: int | None = None,
    as_file: bool = False,
    member=None,
) -> Secret:
    """Create the secret at its place, or replace the value of the one already there."""
    from calvin.workspaces.models import Agent
    from sessions.models import Session

    validate_secret_name(name)
    if agent_id and session_id:
        raise ValidationError("a secret belongs to an agent or to a session, not to both")
    # The place must be of the same workspace: the ciphertext is bound to the workspace too.
    if agent_id and not Agent.objects.filter(id=agent_id, workspace_id=workspace_id).exists():
        raise ValidationError("that agent is not in this workspace")
    if session_id and not Session.objects.filter(id=session_id, workspace_id=workspace_id).exists():
        raise ValidationError("that session is not in this workspace")
    problem = secret_value_problem(value)
    if problem:
        raise ValidationError(problem)
    key_id, ciphertext = crypto.encrypt(
        workspace_id=workspace_id, session_id=session_id, agent_id=agent_id, name=name, value=value
    )
    remember_values([value])
    place = {"workspace_id": workspace_id, "agent_id": agent_id, "session_id": session_id, "name": name}
    set_at = _next_set_at(workspace_id)
    secret = Secret.objects.select_for_update().filter(**place).first()
    if secret is None:
        secret = Secret.objects.create(**place, as_file=as_file, key_id=key_id, ciphertext=ciphertext, set_by=member)
        Secret.objects.filter(id=secret.id).update(set_at=set_at)  # auto_now took this process's clock
        secret.set_at = set_at
        _audited("secret.set", secret, actor=member, changes={"name": (None, name), "scope": (None, _scope(secret))})
        return secret
    as_file_before = secret.as_file
    secret.as_file, secret.key_id, secret.ciphertext, secret.set_by = as_file, key_id, ciphertext, member
    secret.save()
    Secret.objects.filter(id=secret.id).update(set_at=set_at)
    secret.set_at = set_at
    changes = {"name": (name, name), "scope": (_scope(secret), _scope(secret))}
    if as_file_before != as_file:
        changes["as_file"] = (as_file_before, as_file)
    _audited("secret.replace", secret, actor=member, changes=changes)
    return secret


def _next_set_at(workspace_id: int):
    """A set_at later than every committed one of the workspace, taken under its row's lock.

    Callers cache their secrets' scanner under "<count>/<latest set_at>" (tools/caller.py),
    read from the database on every call, so every web process and worker sees a change
    at its next call. That holds only if a replaced value's set_at is the latest: a web
    process whose clock lags another's, or a save that commits after a later one, would
    otherwise leave the version unchanged and a stale scanner in use. Writes of one
    workspace's secrets take turns here, and each is stamped after the ones before it.
    """
    from calvin.workspaces.models import Workspace

    Workspace.objects.select_for_update().filter(id=workspace_id).values_list("id", flat=True).first()
    latest = Secret.objects.filter(workspace_id=workspace_id).aggregate(latest=Max("set_at"))["latest"]
    now = timezone.now()
    return now if latest is None or now > latest else latest + timedelta(microseconds=1)


def _scope(secret: Secret) -> str:
    if secret.session_id:
        return f"session {secret.session_id}"
    if secret.agent_id:
        from calvin.workspaces.models import Agent

        name = Agent.objects.filter(id=secret.agent_id).values_list("name", flat=True).first()
        return f"agent {name}"
    return "workspace"


def _audited(verb: str, secret: Secret, *, actor, changes: dict) -> None:
    """The secret's name and where it is in scope; never its value (audit_record refuses one)."""
    from calvin.audit.services import audit_record

    audit_record(verb=verb, workspace=secret.workspace_id, actor=actor, target=secret, changes=changes)


def secret_set(*, session, name: str, value: str, as_file: bool = False, member=None) -> Secret:
    """A session's own secret."""
    return secret_put(
        workspace_id=session.workspace_id, session_id=session.id, name=name, value=value, as_file=as_file, member=member
    )


def secret_set_for_workspace(*, workspace_id: int, name: str, value: str, as_file: bool = False, member=None) -> Secret:
    """A workspace-wide secret: in scope for every session of the workspace."""
    return secret_put(workspace_id=workspace_id, name=name, value=value, as_file=as_file, member=member)


@transaction.atomic
def secret_delete(*, secret_id: int, workspace_id: int, actor=None) -> bool:
    """`actor`: who deleted it (a Member or a User), for the audit log."""
    secret = Secret.objects.select_for_update().filter(id=secret_id, workspace_id=workspace_id).first()
    if secret is None:
        return False
    changes = {"name": (secret.name, None), "scope": (_scope(secret), None)}
    _audited("secret.delete", secret, actor=actor, changes=changes)
    return Secret.objects.filter(id=secret.id).delete()[0] > 0


def _plain(secret: Secret) -> str:
    value = crypto.decrypt(
        workspace_id=secret.workspace_id,
        session_id=secret.session_id,
        agent_id=secret.agent_id,
        name=secret.name,
        key_id=secret.key_id,
        ciphertext=secret.ciphertext,
    )
    remember_values([value])
    return value


def session_scope(*, session_id: int, workspace_id: int, agent_id: int | None):
    """The rows in scope for a session (all places, before precedence)."""
    place = Q(session_id=session_id) | Q(session__isnull=True, agent__isnull=True)
    if agent_id:
        place |= Q(agent_id=agent_id)
    return Secret.objects.filter(workspace_id=workspace_id).filter(place)


def _session_agent_id(session_id: int) -> int | None:
    from sessions.models import Session

    return Session.objects.filter(id=session_id).values_list("agent_id", flat=True).first()


def session_secrets(*, session_id: int, workspace_id: int, agent_id: int | None = None) -> list[tuple[Secret, str]]:
    """(row, value) for each name in scope, the nearest place winning. Fails closed: a
    secret that cannot be decrypted raises (naming it) instead of being skipped."""
    if agent_id is None:
        agent_id = _session_agent_id(session_id)
    chosen: dict[str, Secret] = {}
    for secret in session_scope(session_id=session_id, workspace_id=workspace_id, agent_id=agent_id):
        held = chosen.get(secret.name)
        if held is None or PRECEDENCE[secret.scope] > PRECEDENCE[held.scope]:
            chosen[secret.name] = secret
    return [(secret, _plain(secret)) for _, secret in sorted(chosen.items())]


def session_secret_pairs(*, session_id: int, workspace_id: int, agent_id: int | None = None) -> list[tuple[str, str]]:
    """(name, value) for every secret an outbound check must look for: every place's, even
    one shadowed by a nearer secret of the same name (its value must not leave either)."""
    if agent_id is None:
        agent_id = _session_agent_id(session_id)
    rows = session_scope(session_id=session_id, workspace_id=workspace_id, agent_id=agent_id)
    return [(secret.name, value) for secret in rows if (value := _plain(secret))]


def session_text_redacted(*, session_id: int, workspace_id: int, text: str) -> str:
    """`text` fit to store or show in the session's thread: every secret in its scope (plain
    or encoded) redacted, and Slack and runner token shapes too. For texts made elsewhere,
    such as an error a chat platform answered, which no outbound check has seen.

    Fails closed: a text that cannot be checked (a key is gone) is not kept at all."""
    if not text:
        return text
    try:
        pairs = session_secret_pairs(session_id=session_id, workspace_id=workspace_id)
    except (crypto.VaultUnavailable, crypto.VaultCorrupt) as exc:
        return f"(not shown: it cannot be checked against the session's secrets: {exc})"
    return redact_text(scanner_for(pairs).redact(text, mark=REDACTED))


def session_secret_values(*, session_id: int, workspace_id: int) -> list[str]:
    return [value for _, value in session_secret_pairs(session_id=session_id, workspace_id=workspace_id)]


def secret_name_taken(*, session_id: int, workspace_id: int, agent_id: int | None, name: str) -> bool:
    """Whether `name` is already set for the session, at any place in its scope."""
    return session_scope(session_id=session_id, workspace_id=workspace_id, agent_id=agent_id).filter(name=name).exists()


# Other apps that seal values with the vault's keys (Slack bot tokens: calvin.chat) register
# how to seal theirs again under the first key, from their AppConfig.ready(): the vault does
# not import them.
RESEALERS: list = []


def resealer(function):
    """Decorator: `function() -> int` re-seals an app's own values when the vault rotates."""
    if function not in RESEALERS:
        RESEALERS.append(function)
    return function


@transaction.atomic
def secrets_rotate() -> int:
    """Re-encrypt every secret under the first key; returns how many changed."""
    first = crypto.vault_keys()[0].key_id
    changed = 0
    for secret in Secret.objects.select_for_update().exclude(key_id=first):
        key_id, ciphertext = crypto.encrypt(
            workspace_id=secret.workspace_id,
            session_id=secret.session_id,
            agent_id=secret.agent_id,
            name=secret.name,
            value=_plain(secret),
        )
        Secret.objects.filter(id=secret.id).update(key_id=key_id, ciphertext=ciphertext)
        changed += 1
    return changed + sum(reseal() for reseal in RESEALERS)
