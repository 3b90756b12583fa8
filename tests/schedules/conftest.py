from datetime import UTC, datetime

import pytest
from django.utils import timezone

from calvin.schedules.services import task_create
from calvin.schedules.specs import TaskCreate
from calvin.workspaces.models import Agent, Member
from sessions.hosts import host_create
from sessions.models import Host
from tests.api.conftest import other_workspace  # noqa: F401  (fixtures)
from tests.dashboard.conftest import browser, page, plain_member  # noqa: F401

# A Monday in January: no DST change near it anywhere.
START = datetime(2027, 1, 4, 8, 0, tzinfo=UTC)


@pytest.fixture
def agent(workspace):
    return Agent.objects.create(workspace=workspace, name="reporter")


@pytest.fixture
def owner(workspace):
    return Member.objects.get(workspace=workspace, user__username="owner")


def make_task(agent, member=None, now=START, **fields):
    spec = {"name": "daily-report", "prompt": "write the report", "recurrence": "0 * * * *", **fields}
    return task_create(agent=agent, spec=TaskCreate(**spec), member=member, now=now)


@pytest.fixture
def host(workspace):
    """A host that is connected as far as the gateway knows, to claim and finish turns by hand."""
    made, _ = host_create(name="h")
    Host.objects.filter(id=made.id).update(channel_name="h-channel", capacity=4, last_heartbeat_at=timezone.now())
    return made
