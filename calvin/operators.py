"""Who may act as an operator on a workspace's rows (pause an agent, retry a call, expire an
approval): a superuser, or an owner or admin of that workspace. The services check it
themselves; the admin's scoping is a second wall, not the only one."""

from calvin.workspaces.models import Member


class OperatorRefused(Exception):
    """An operator action that changes nothing; the text says why."""


def operator_for(user, workspace_id: int):
    """The actor an operator action is recorded under: the person's Member in the workspace
    when they have one (so the audit row and notices name them as the team knows them), else
    the User (a superuser acting on a workspace of which they are no member)."""
    member = Member.objects.select_related("user").filter(workspace_id=workspace_id, user=user).first()
    return member or user


def operator_check(actor, workspace_id: int) -> None:
    """Raises OperatorRefused unless `actor` (a Member or a User) may operate on the workspace."""
    if isinstance(actor, Member):
        if actor.workspace_id == workspace_id and actor.is_admin:
            return
        if actor.user is not None and actor.user.is_active and actor.user.is_superuser:
            return
    elif getattr(actor, "is_active", False) and getattr(actor, "is_superuser", False):
        return
    raise OperatorRefused("only an owner or admin of its workspace (or a superuser) can do this")


def operator_user(actor):
    """The User behind an actor (a Member or a User), or None for a Slack-only Member."""
    return actor.user if isinstance(actor, Member) else actor


def operator_label(actor) -> str:
    user = operator_user(actor)
    return user.get_username() if user is not None else str(actor)
