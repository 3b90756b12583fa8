"""Workspace state changes, including the demo workspace `manage.py up` prepares."""

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from calvin.audit.services import audit_record
from calvin.workspaces.models import Agent, Member, Quota, Workspace
from calvin.workspaces.slug_rules import name_problem, slug_normalise, slug_problem

DEMO_SLUG = "demo"
DEMO_THREAD_TITLE = "Demo session"


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


def _admin_now(member: Member) -> Member:
    """The member as the database has them now (a role changed since the page loaded counts)."""
    fresh = Member.objects.select_related("workspace", "user").filter(pk=member.pk).first()
    if fresh is None or not fresh.is_admin:
        raise WorkspaceRefused("only the workspace's owners and admins change its settings")
    return fresh


@transaction.atomic
def workspace_rename(*, member: Member, name: str) -> bool:
    """The workspace's new name (its slug stays: links and the Slack install name it); False when unchanged."""
    member = _admin_now(member)
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
def workspace_slack_uninstall(*, member: Member, team_id: str) -> str:
    """Forget the workspace's Slack installation of `team_id` (the one the page showed); returns its team's name.

    As when Slack says the app was uninstalled: Calvin's copy of the bot token goes, the running
    sessions of Slack threads stop with a notice, posts waiting for Slack fail. The app stays
    listed in Slack until removed there."""
    from calvin.chat.models import SlackInstallation
    from calvin.chat.slack.inbound import slack_team_uninstall

    member = _admin_now(member)
    installation = SlackInstallation.objects.select_for_update().filter(workspace_id=member.workspace_id).first()
    if installation is None or installation.team_id != team_id:
        raise WorkspaceRefused("this workspace is not connected to that Slack team (any more): nothing changed")
    if installation.from_environment:
        raise WorkspaceRefused(
            "this connection comes from the gateway's SLACK_BOT_TOKEN: it is made again while that is set;"
            " remove SLACK_BOT_TOKEN from the gateway's settings to disconnect"
        )
    team = installation.team_name or installation.team_id
    # installation_remove records slack.uninstall, once, whoever removes it.
    slack_team_uninstall(team_id=installation.team_id, actor=member, via=None)
    return team


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
    # The printed .mcp.json's session: its agent is whatever a person runs with that file, so
    # no host runs it (a host would start a runner of its own and revoke the printed token).
    yours = Agent.objects.filter(workspace=workspace, name=YOUR_AGENT_NAME).first() or agent_create(
        workspace=workspace, name=YOUR_AGENT_NAME, provider=Agent.Provider.EXTERNAL
    )
    session = Session.objects.filter(workspace=workspace, thread__title=DEMO_THREAD_TITLE).first() or session_start(
        workspace=workspace, owner=owner, title=DEMO_THREAD_TITLE, agent=yours
    )
    return Demo(
        admin_username=admin.username,
        admin_password=password,
        admin_has_password=admin.has_usable_password(),
        workspace=workspace,
        session=session,
    )


DEMO_AGENT_THREAD_TITLE = "Talk to the demo agent"
# The script the demo agent plays when no logged-in Claude Code is on the machine: it shows
# a card and a file going through the real tools, so a newcomer sees a working agent.
DEMO_SCRIPT = [
    {
        "server": "calvin",
        "tool": "post_card",
        "arguments": {
            "spec": {
                "root": "card",
                "elements": {
                    "card": {"type": "Card", "props": {"title": "Hello from the demo agent"}, "children": ["said"]},
                    "said": {"type": "Text", "props": {"text": "You said: {prompt}"}},
                },
            }
        },
    },
    {"server": "calvin", "tool": "send_file", "arguments": {"path": "CLAUDE.md", "comment": "My instructions."}},
    {
        "reply": "I am Calvin's demo agent, a script: I posted a card and a file through the real tools. "
        "Log in to Claude Code on this machine (run `claude` once) and restart Calvin to talk to a real agent."
    },
]
DEMO_INSTRUCTIONS = "You are Calvin's demo agent. Answer in the thread; show what you made with send_file."


@transaction.atomic
def demo_agent_ensure(*, workspace: Workspace, owner: Member, claude_code: bool):
    """The agent a local host runs for `up`: Claude Code when it is logged in here, else the script."""
    import json

    from sessions.models import Session
    from sessions.services import session_start

    agent = agent_default_for(workspace)
    agent.provider = Agent.Provider.CLAUDE_CODE if claude_code else Agent.Provider.SCRIPT
    agent.provider_script = "" if claude_code else json.dumps(DEMO_SCRIPT)
    agent.instructions = agent.instructions or DEMO_INSTRUCTIONS
    agent.save(update_fields=["provider", "provider_script", "instructions"])
    session = Session.objects.filter(workspace=workspace, thread__title=DEMO_AGENT_THREAD_TITLE).first()
    return session or session_start(workspace=workspace, owner=owner, agent=agent, title=DEMO_AGENT_THREAD_TITLE)
