"""The API over real HTTP against the gateway: people's tokens, runners' tokens, two workspaces."""

from dataclasses import dataclass

import httpx2
import pytest

from calvin.api.tokens import api_token_create
from calvin.workspaces.models import Agent, Member
from calvin.workspaces.services import workspace_create
from sessions.services import runner_start, session_start
from tests.dashboard.conftest import browser, page, plain_member  # noqa: F401  (fixtures for the browser tests)


@dataclass
class Client:
    base: str
    token: str

    def _headers(self, headers) -> dict:
        return {"Authorization": f"Bearer {self.token}", **(headers or {})}

    def get(self, path: str, **params) -> httpx2.Response:
        return httpx2.get(self.base + path, params=params, headers=self._headers(None), timeout=30)

    def post(self, path: str, json=None, headers=None) -> httpx2.Response:
        return httpx2.post(self.base + path, json=json, headers=self._headers(headers), timeout=30)


@pytest.fixture
def api_url(gateway) -> str:
    return gateway + "/api/v1"


@pytest.fixture
def other_workspace(django_user_model):
    user = django_user_model.objects.create_user("stranger", password="pw-stranger-123")
    return workspace_create(name="Globex", slug="globex", owner_user=user)


def member_of(workspace, username: str, role: str = Member.Role.MEMBER, django_user_model=None):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username, password=f"pw-{username}-123")
    return Member.objects.create(workspace=workspace, user=user, role=role)


@pytest.fixture
def person(api_url, workspace):
    """As the workspace's owner, with an API token."""
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    _, token = api_token_create(member=owner, name="laptop")
    return Client(api_url, token)


@pytest.fixture
def stranger(api_url, other_workspace):
    owner = Member.objects.get(workspace=other_workspace, user__username="stranger")
    _, token = api_token_create(member=owner, name="theirs")
    return Client(api_url, token)


def agent_client(api_url, workspace, *, scope: str = Agent.CliScope.GROUP, name: str = "helper"):
    """An agent of that scope with a session of its own, as its runner sees the API."""
    agent = Agent.objects.create(workspace=workspace, name=name, cli_scope=scope)
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, title=f"{name}'s work", agent=agent)
    _, token = runner_start(session=session)
    client = Client(api_url, token)
    client.agent, client.session = agent, session
    return client
