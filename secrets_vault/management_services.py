"""Secrets people manage (the admin and the dashboard): who may, what they see, and the
changes they make, all through the vault's services.

A workspace's owners and admins manage its workspace-level and agent-level secrets. A
session's own secrets (set through request_secret) are listed, never set from here.
Nothing here returns or logs a value.
"""

from django.core.exceptions import ValidationError
from django.db import transaction

from calvin.workspaces.models import Agent, Member
from secrets_vault import crypto
from secrets_vault.models import Secret
from secrets_vault.services import secret_delete, secret_put

MANAGER_ROLES = (Member.Role.OWNER, Member.Role.ADMIN)
NO_KEY = (
    "Secrets cannot be stored now: this Calvin has no vault key (SP_STORE_KEY). "
    "Ask its operator to set one; nothing was stored."
)
BAD_KEY = (
    "Secrets cannot be stored now: this Calvin's vault key (SP_STORE_KEY) is not a valid key. "
    "Ask its operator to fix it; nothing was stored."
)


def vault_problem() -> str | None:
    """Why no value can be stored at the moment (no key, or one that is not a key), or None."""
    try:
        keys = crypto.vault_keys()
    except (crypto.VaultUnavailable, ValueError):  # binascii.Error is a ValueError
        return BAD_KEY
    return None if keys else NO_KEY


def managed_workspace_ids(user) -> list[int]:
    """The workspaces whose secrets this person manages: those where they are an owner or an admin."""
    if not user.is_authenticated:
        return []
    return list(Member.objects.filter(user=user, role__in=MANAGER_ROLES).values_list("workspace_id", flat=True))


def manager_in(user, workspace_id: int) -> Member | None:
    """The person's Member row in the workspace if they are its owner or an admin, else None."""
    if not user.is_authenticated:
        return None
    return (
        Member.objects.filter(user=user, workspace_id=workspace_id, role__in=MANAGER_ROLES)
        .select_related("workspace")
        .first()
    )


def member_of(user, workspace_id: int) -> Member | None:
    """Who set a secret, for its `set_by` (a superuser in the admin may be no member)."""
    return Member.objects.filter(user=user, workspace_id=workspace_id).first()


def secrets_listed(workspace_ids):
    """Every secret of these workspaces for a list: never the ciphertext."""
    return (
        Secret.objects.filter(workspace_id__in=workspace_ids)
        .defer("ciphertext")
        .select_related("workspace", "agent", "session", "set_by__user")
        .order_by("name", "agent__name", "session_id", "id")
    )


def managed_secret(*, workspace_id: int, secret_id: int) -> Secret | None:
    """A workspace-level or agent-level secret of this workspace (a session's is not managed here)."""
    return (
        Secret.objects.filter(id=secret_id, workspace_id=workspace_id, session__isnull=True)
        .defer("ciphertext")
        .select_related("agent")
        .first()
    )


def place_name(agent: Agent | None) -> str:
    return f"agent {agent.name}" if agent is not None else "the workspace"


def secret_place_problem(*, workspace_id: int, agent: Agent | None, name: str) -> str | None:
    """Why a new secret cannot go to this place: an agent of another workspace, or the name already set there."""
    if agent is not None and agent.workspace_id != workspace_id:
        return "that agent is not one of this workspace's agents"
    taken = Secret.objects.filter(
        workspace_id=workspace_id, agent_id=agent.id if agent else None, session__isnull=True, name=name
    )
    if taken.exists():
        return f"{name} is already set for {place_name(agent)}: replace its value instead"
    return None


@transaction.atomic
def secret_manage_put(
    *, workspace_id: int, name: str, value: str, agent_id: int | None = None, as_file: bool = False, member=None
) -> Secret:
    """Set a workspace-level or agent-level secret (create, or replace the value at that place).

    secret_put takes any agent id; here the agent must be one of the workspace's own."""
    if agent_id is not None and not Agent.objects.filter(id=agent_id, workspace_id=workspace_id).exists():
        raise ValidationError("that agent is not one of this workspace's agents")
    return secret_put(
        workspace_id=workspace_id, name=name, value=value, agent_id=agent_id, as_file=as_file, member=member
    )


def secret_replace(*, secret: Secret, value: str, as_file: bool, member=None) -> Secret:
    """A new value for a managed secret, at its place and under its name."""
    if secret.session_id is not None:
        raise ValidationError("a session's own secret is set through its request, not here")
    return secret_manage_put(
        workspace_id=secret.workspace_id,
        name=secret.name,
        value=value,
        agent_id=secret.agent_id,
        as_file=as_file,
        member=member,
    )


def secret_as_file_set(*, secret_id: int, workspace_id: int, as_file: bool) -> None:
    """Whether the value is written to a file: not part of the value's encryption, so no value is needed."""
    Secret.objects.filter(id=secret_id, workspace_id=workspace_id).update(as_file=as_file)


def secret_remove(*, secret_id: int, workspace_id: int, member=None) -> bool:
    """Delete a workspace-level or agent-level secret of this workspace; False when there is none."""
    if managed_secret(workspace_id=workspace_id, secret_id=secret_id) is None:
        return False
    return secret_delete(secret_id=secret_id, workspace_id=workspace_id, actor=member)
