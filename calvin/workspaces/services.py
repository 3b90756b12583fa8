"""Workspace state changes (the demo workspace `manage.py up` prepares: sessions/demo.py)."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from calvin.audit.services import audit_record
from calvin.workspaces.models import Agent, Member, Quota, Workspace
from calvin.workspaces.slug_rules import name_problem, slug_normalise, slug_problem

DEMO_SLUG = "demo"  # the demo workspace `manage.py up` prepares (sessions/demo.py)


class WorkspaceRefused(Exception):
    """Nothing changed; the text says why, `field` which form field it is about (or None)."""

    def __init__(self, text: str, *, field: str | None = None):
        super().__init__(text)
        self.field = field


def owned_workspace_count(user) -> int:
    return Member.objects.filter(user=user, role=Member.Role.OWNER).count()


@transaction.atomic
def workspace_create(*, name: str, slug: str, owner_user=None) -> Workspace:
    """A workspace with its quota, `owner_user` its owner. The slug is checked, never rewritten
    (only ASCII capitals become small letters); one person owns at most CALVIN_WORKSPACES_PER_PERSON."""
    name = name.strip() if isinstance(name, str) else name
    slug = slug_normalise(slug)
    for field, problem in (("name", name_problem(name)), ("slug", slug_problem(slug))):
        if problem:
            raise WorkspaceRefused(problem, field=field)
    if owner_user is not None and not owner_user.is_superuser:
        # The person's row locked: two creates at once by one person count one after the other.
        get_user_model().objects.select_for_update().filter(pk=owner_user.pk).first()
        limit = settings.CALVIN_WORKSPACES_PER_PERSON
        if owned_workspace_count(owner_user) >= limit:
            raise WorkspaceRefused(
                f"you already own as many workspaces as one person may create here ({limit});"
                " ask an operator if you need more"
            )
    if Workspace.objects.filter(slug__iexact=slug).exists():
        raise WorkspaceRefused(f"the slug {slug!r} is taken: choose another", field="slug")
    try:
        with transaction.atomic():
            workspace = Workspace.objects.create(name=name, slug=slug)
    except IntegrityError:  # created by someone else since the check
        raise WorkspaceRefused(f"the slug {slug!r} is taken: choose another", field="slug") from None
    Quota.objects.create(workspace=workspace)
    if owner_user is not None:
        Member.objects.create(workspace=workspace, user=owner_user, role=Member.Role.OWNER)
    audit_record(
        verb="workspace.create",
        workspace=workspace,
        actor=owner_user,
        target=workspace,
        changes={"name": (None, name), "slug": (None, slug)},
    )
    return workspace


def workspace_admin_now(member: Member) -> Member:
    """The member as the database has them now (a role changed since the page loaded counts)."""
    fresh = Member.objects.select_related("workspace", "user").filter(pk=member.pk).first()
    if fresh is None or not fresh.is_admin:
        raise WorkspaceRefused("only the workspace's owners and admins change its settings")
    return fresh


@transaction.atomic
def workspace_rename(*, member: Member, name: str) -> bool:
    """The workspace's new name (its slug stays: links and the Slack install name it); False when unchanged."""
    member = workspace_admin_now(member)
    name = name.strip() if isinstance(name, str) else name
    problem = name_problem(name)
    if problem:
        raise WorkspaceRefused(problem, field="name")
    workspace = Workspace.objects.select_for_update().get(pk=member.workspace_id)
    if workspace.name == name:
        return False
    before = workspace.name
    workspace.name = name
    workspace.save(update_fields=["name"])
    audit_record(
        verb="workspace.rename", workspace=workspace, actor=member, target=workspace, changes={"name": (before, name)}
    )
    return True


@transaction.atomic
def workspace_self_modification_deciders_set(*, member: Member, deciders: str) -> bool:
    """Who decides an agent's changes to itself (approvals.policy.session_owner_decides): the
    workspace's owners and admins only, or the session's starter too. False when unchanged."""
    member = workspace_admin_now(member)
    if deciders not in Workspace.SelfModificationDeciders.values:
        raise WorkspaceRefused(f"{deciders!r} is not one of the choices", field="self_modification_deciders")
    workspace = Workspace.objects.select_for_update().get(pk=member.workspace_id)
    before = workspace.self_modification_deciders
    if before == deciders:
        return False
    workspace.self_modification_deciders = deciders
    workspace.save(update_fields=["self_modification_deciders"])
    # The verb the admin's Workspace form records too (calvin/workspaces/admin.py).
    audit_record(
        verb="workspace.change",
        workspace=workspace,
        actor=member,
        target=workspace,
        changes={"self_modification_deciders": (before, deciders)},
    )
    return True


DEFAULT_AGENT_NAME = "main"
YOUR_AGENT_NAME = "your-own-agent"


def agent_directory_for(agent_id: int) -> str:
    """Where the agent's own directory is, relative to each host's state directory: it lives
    on the hosts that run its sessions (sessions/host/daemon.py makes it), never on the gateway."""
    return f"agents/agent-{agent_id}/workspace"


@transaction.atomic
def agent_create(*, workspace: Workspace, name: str, instructions: str = "", created_by: Agent | None = None, **config):
    """An agent with its own workspace directory (made on a host when a session needs it)."""
    agent = Agent.objects.create(
        workspace=workspace, name=name, instructions=instructions, created_by=created_by, **config
    )
    agent.directory = agent_directory_for(agent.id)
    agent.save(update_fields=["directory"])
    return agent


def agent_default_for(workspace: Workspace) -> Agent:
    """The agent a session gets when nobody chose one."""
    agent = Agent.objects.filter(workspace=workspace, name=DEFAULT_AGENT_NAME).first()
    if agent is not None:
        return agent
    try:
        with transaction.atomic():
            return agent_create(workspace=workspace, name=DEFAULT_AGENT_NAME)
    except IntegrityError:  # the workspace's first two sessions started at once: the other made it
        return Agent.objects.get(workspace=workspace, name=DEFAULT_AGENT_NAME)
