"""Workspace state changes, including the demo workspace `manage.py up` prepares."""

import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from calvin.workspaces.models import Agent, Member, Quota, Workspace

DEMO_SLUG = "demo"
DEMO_THREAD_TITLE = "Demo session"


@transaction.atomic
def workspace_create(*, name: str, slug: str, owner_user=None) -> Workspace:
    workspace = Workspace.objects.create(name=name, slug=slug)
    Quota.objects.create(workspace=workspace)
    if owner_user is not None:
        Member.objects.create(workspace=workspace, user=owner_user, role=Member.Role.OWNER)
    return workspace


DEFAULT_AGENT_NAME = "main"


def agent_directory_for(agent_id: int) -> str:
    return str(Path(settings.CALVIN_AGENTS_DIR) / f"agent-{agent_id}")


@transaction.atomic
def agent_create(*, workspace: Workspace, name: str, instructions: str = "", created_by: Agent | None = None, **config):
    """An agent with its own workspace directory."""
    agent = Agent.objects.create(
        workspace=workspace, name=name, instructions=instructions, created_by=created_by, **config
    )
    agent.directory = agent_directory_for(agent.id)
    agent.save(update_fields=["directory"])
    Path(agent.directory).mkdir(parents=True, exist_ok=True)
    return agent


def agent_default_for(workspace: Workspace) -> Agent:
    """The agent a session gets when nobody chose one."""
    agent = Agent.objects.filter(workspace=workspace, name=DEFAULT_AGENT_NAME).first()
    return agent or agent_create(workspace=workspace, name=DEFAULT_AGENT_NAME)


@dataclass
class Demo:
    admin_username: str
    admin_password: str | None  # generated just now, to be shown once; None otherwise
    admin_has_password: bool
    workspace: Workspace
    session: object


@transaction.atomic
def demo_ensure(*, can_show_password: bool) -> Demo:
    """An admin login, a demo workspace and a demo session; creates only what is missing.

    The admin gets a generated password only when it can be shown on a terminal: an output
    that goes to a file (a log in a shared /tmp) must not hold a working password, so there
    the admin starts with none and its owner sets one with `manage.py changepassword admin`.
    """
    from sessions.models import Session
    from sessions.services import session_start

    User = get_user_model()
    admin = User.objects.filter(username="admin").first()
    if admin is None:
        admin = User.objects.create_superuser("admin", "admin@localhost", None)  # no usable password
    password = None
    if can_show_password and not admin.has_usable_password():
        password = secrets.token_urlsafe(12)
        admin.set_password(password)
        admin.save(update_fields=["password"])
    workspace = Workspace.objects.filter(slug=DEMO_SLUG).first() or workspace_create(
        name="Demo", slug=DEMO_SLUG, owner_user=admin
    )
    owner = Member.objects.get_or_create(workspace=workspace, user=admin, defaults={"role": Member.Role.OWNER})[0]
    session = Session.objects.filter(workspace=workspace, thread__title=DEMO_THREAD_TITLE).first() or session_start(
        workspace=workspace, owner=owner, title=DEMO_THREAD_TITLE
    )
    return Demo(
        admin_username=admin.username,
        admin_password=password,
        admin_has_password=admin.has_usable_password(),
        workspace=workspace,
        session=session,
    )
