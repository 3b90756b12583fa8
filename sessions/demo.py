"""The demo workspace, its admin and its sessions, which `manage.py up` prepares."""

import json
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from calvin.workspaces.models import Agent, Member, Workspace
from calvin.workspaces.services import (
    DEMO_SLUG,
    YOUR_AGENT_NAME,
    agent_create,
    agent_default_for,
    workspace_create,
)
from sessions.models import Session
from sessions.services import session_start

DEMO_THREAD_TITLE = "Demo session"


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
    agent = agent_default_for(workspace)
    agent.provider = Agent.Provider.CLAUDE_CODE if claude_code else Agent.Provider.SCRIPT
    agent.provider_script = "" if claude_code else json.dumps(DEMO_SCRIPT)
    agent.instructions = agent.instructions or DEMO_INSTRUCTIONS
    agent.save(update_fields=["provider", "provider_script", "instructions"])
    session = Session.objects.filter(workspace=workspace, thread__title=DEMO_AGENT_THREAD_TITLE).first()
    return session or session_start(workspace=workspace, owner=owner, agent=agent, title=DEMO_AGENT_THREAD_TITLE)


PREVIEW_THREAD_TITLE = "See a preview"
PREVIEW_AGENT_NAME = "preview-demo"
PREVIEW_AGENT = Path(__file__).resolve().parent / "demo_preview_agent.py"
PREVIEW_INSTRUCTIONS = "Calvin's preview demo: serves a page from its sandbox and answers with its preview URL."


@transaction.atomic
def demo_preview_ensure(*, workspace: Workspace, owner: Member):
    """The "See a preview" thread and its agent (sessions/demo_preview_agent.py, a `command`).

    Its command names this Python and this checkout each time: `up` on a moved checkout or
    another virtualenv still finds them (the local host runs on the same machine)."""
    agent = Agent.objects.filter(workspace=workspace, name=PREVIEW_AGENT_NAME).first() or agent_create(
        workspace=workspace, name=PREVIEW_AGENT_NAME, instructions=PREVIEW_INSTRUCTIONS
    )
    agent.provider = Agent.Provider.COMMAND
    agent.provider_command = [sys.executable, str(PREVIEW_AGENT)]
    agent.save(update_fields=["provider", "provider_command"])
    session = Session.objects.filter(workspace=workspace, thread__title=PREVIEW_THREAD_TITLE).first()
    return session or session_start(workspace=workspace, owner=owner, agent=agent, title=PREVIEW_THREAD_TITLE)
