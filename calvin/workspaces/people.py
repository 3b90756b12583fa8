"""Who is in a workspace and with which role: role changes, removals, leaving.

The rules, one place:
- Owners change anyone's role (owner, admin, member) and remove anyone.
- Admins change roles between admin and member, and remove admins and members; they cannot
  make an owner, nor demote or remove one (an owner's standing is for owners to change).
- Members change nobody's role and remove nobody.
- Anyone may leave; the last owner cannot leave, be demoted or be removed, so a workspace
  always has someone who can run it.

The owner count is read with the workspace's owner rows locked (SELECT ... FOR UPDATE, in id
order), so two owners demoting each other at the same moment cannot both succeed.
"""

from django.db import transaction
from django.db.models import Q

from calvin.audit.services import audit_record
from calvin.workspaces.models import Member

ROLES = tuple(Member.Role.values)


class PeopleRefused(Exception):
    """A role change, removal or leave the rules refuse; the message says why, for the person."""


class MemberNotFound(PeopleRefused):
    """No such person in this workspace (another workspace's ids look the same: not found)."""


def roles_grantable_by(member: Member) -> list[str]:
    """The roles a person may give (in an invitation or a role change): the forms' choices."""
    if member.role == Member.Role.OWNER:
        return [Member.Role.MEMBER, Member.Role.ADMIN, Member.Role.OWNER]
    if member.role == Member.Role.ADMIN:
        return [Member.Role.MEMBER, Member.Role.ADMIN]
    return []


def people_of(workspace_id: int):
    """A workspace's people, longest-standing first."""
    return Member.objects.filter(workspace_id=workspace_id).select_related("user").order_by("created_at", "id")


def _locked(*, workspace_id: int, member_ids: list[int]) -> tuple[dict[int, Member], int]:
    """The given members and every owner of the workspace, locked; and how many owners there are."""
    rows = list(
        Member.objects.select_for_update(of=("self",))
        .filter(Q(workspace_id=workspace_id, role=Member.Role.OWNER) | Q(workspace_id=workspace_id, id__in=member_ids))
        .select_related("user")
        .order_by("id")
    )
    by_id = {row.id: row for row in rows}
    return by_id, sum(1 for row in rows if row.role == Member.Role.OWNER)


def _actor_and_target(*, actor: Member, member_id: int) -> tuple[Member, Member, int]:
    by_id, owners = _locked(workspace_id=actor.workspace_id, member_ids=[actor.id, member_id])
    if actor.id not in by_id:
        raise PeopleRefused("You are no longer a member of this workspace.")
    if member_id not in by_id:
        raise MemberNotFound("No such person in this workspace.")
    return by_id[actor.id], by_id[member_id], owners


def _name(member: Member) -> str:
    return str(member)


@transaction.atomic
def member_role_change(*, actor: Member, member_id: int, role: str) -> Member:
    """Give a person of the actor's workspace another role; returns the member as changed."""
    if role not in ROLES:
        raise PeopleRefused(f"Unknown role {role[:20]!r}: choose owner, admin or member.")
    actor, target, owners = _actor_and_target(actor=actor, member_id=member_id)
    if not actor.is_admin:
        raise PeopleRefused("Only owners and admins change roles.")
    if actor.role != Member.Role.OWNER and Member.Role.OWNER in (target.role, role):
        raise PeopleRefused("Only an owner can make someone an owner or change an owner's role.")
    if target.role == role:
        return target
    if target.role == Member.Role.OWNER and owners <= 1:
        raise PeopleRefused(f"{_name(target)} is the last owner: make someone else an owner first.")
    before = target.role
    target.role = role
    target.save(update_fields=["role"])
    audit_record(
        verb="member.role_change",
        workspace=target.workspace_id,
        actor=actor,
        target=target,
        changes={"role": (before, role)},
    )
    return target


@transaction.atomic
def member_remove(*, actor: Member, member_id: int) -> Member:
    """Take a person out of the actor's workspace. Their pages 404 and their sockets close at once
    (deleting the row pushes a re-check to their open thread pages: calvin/dashboard/signals.py)."""
    actor, target, owners = _actor_and_target(actor=actor, member_id=member_id)
    if target.id == actor.id:
        return _leave(target, owners)
    if not actor.is_admin:
        raise PeopleRefused("Only owners and admins remove people.")
    # An owner removing another owner leaves at least themselves: no last-owner check is needed here.
    if target.role == Member.Role.OWNER and actor.role != Member.Role.OWNER:
        raise PeopleRefused("Only an owner can remove an owner.")
    return _member_delete(target, verb="member.remove", actor=actor)


@transaction.atomic
def member_leave(*, member: Member) -> Member:
    """The person leaves the workspace themselves."""
    by_id, owners = _locked(workspace_id=member.workspace_id, member_ids=[member.id])
    if member.id not in by_id:
        raise MemberNotFound("You are not a member of this workspace.")
    return _leave(by_id[member.id], owners)


def _leave(member: Member, owners: int) -> Member:
    if member.role == Member.Role.OWNER and owners <= 1:
        raise PeopleRefused("You are the last owner: make someone else an owner before you leave.")
    return _member_delete(member, verb="member.leave", actor=member)


def _member_delete(member: Member, *, verb: str, actor: Member) -> Member:
    audit_record(
        verb=verb, workspace=member.workspace_id, actor=actor, target=member, changes={"role": (member.role, None)}
    )
    member.delete()
    return member
