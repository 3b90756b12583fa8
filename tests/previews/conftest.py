"""Fixtures of the preview proxy's tests: a server to show, a light host, a second web server."""

import os

import pytest

from calvin.workspaces.models import Member
from sessions.hosts import host_create
from sessions.models import Session
from sessions.services import session_start
from tests.dashboard.conftest import browser, page  # noqa: F401 (Chromium, for the browser tests)
from tests.previews.light_host import LightHost
from tests.previews.upstreams import Upstream
from tests.reliability.processes import Gateway
from tests.support.celery_processes import subprocess_database_url


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.stop()


@pytest.fixture
def seated(gateway, workspace):
    """A session whose host is a connected light host."""
    host, token = host_create(name="light", workspace=workspace)
    light = LightHost(gateway=gateway, token=token).start()
    session = session_start(workspace=workspace, owner=Member.objects.filter(workspace=workspace).first(), title="t")
    Session.objects.filter(id=session.id).update(host=host)
    yield session, light, host
    light.stop()


@pytest.fixture
def second_gateway(gateway, django_db_setup, tmp_path):
    """Another web process (`python -m calvin.http_server`) on the same database and Redis: a
    request there reaches a host connected here by the channel layer."""
    web = Gateway(env={**os.environ, "DATABASE_URL": subprocess_database_url()}, log=tmp_path / "second-web.log")
    yield web.url
    web.stop()
