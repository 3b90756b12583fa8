"""A session's environment reaches a real subprocess; file secrets are the owner's alone."""

import os
import stat
import subprocess
import sys

import pytest

from calvin.workspaces.services import agent_create, workspace_create
from secrets_vault.crypto import new_key
from secrets_vault.environment import secret_files_directory, session_environment
from secrets_vault.services import secret_delete, secret_put, secret_set
from sessions.services import session_start

pytestmark = pytest.mark.django_db

READ_BACK = "import os, sys; print(os.environ[sys.argv[1]], end='')"


@pytest.fixture(autouse=True)
def vault(settings, tmp_path):
    settings.SP_STORE_KEY = [new_key()]
    settings.CALVIN_SECRET_FILES_DIR = tmp_path / "secret-files"


@pytest.fixture
def session(workspace):
    return session_start(workspace=workspace, title="env")


def run_with(environment: dict, *args: str) -> str:
    completed = subprocess.run(
        [sys.executable, *args], env={**os.environ, **environment}, capture_output=True, text=True, check=True
    )
    return completed.stdout


def test_a_secret_reaches_a_real_subprocess(session):
    secret_set(session=session, name="STRIPE_API_KEY", value="sk_test_env-value\nwith a newline")
    environment = session_environment(session_id=session.id)
    assert run_with(environment, "-c", READ_BACK, "STRIPE_API_KEY") == "sk_test_env-value\nwith a newline"


def test_every_place_is_in_scope_and_the_nearest_wins(session, workspace):
    secret_put(workspace_id=workspace.id, name="ORG_TOKEN", value="org-wide")
    secret_put(workspace_id=workspace.id, name="SHADOWED", value="from-workspace")
    secret_put(workspace_id=workspace.id, agent_id=session.agent_id, name="AGENT_TOKEN", value="agent-only")
    secret_put(workspace_id=workspace.id, agent_id=session.agent_id, name="SHADOWED", value="from-agent")
    environment = session_environment(session_id=session.id)
    assert environment == {"AGENT_TOKEN": "agent-only", "ORG_TOKEN": "org-wide", "SHADOWED": "from-agent"}
    secret_set(session=session, name="SHADOWED", value="from-session")
    assert session_environment(session_id=session.id)["SHADOWED"] == "from-session"


def test_other_places_are_not_in_scope(session, workspace, django_user_model):
    other_session = session_start(workspace=workspace, title="other")
    secret_set(session=other_session, name="OTHER_SESSION", value="not-mine-1")
    other_agent = agent_create(workspace=workspace, name="other-agent")
    secret_put(workspace_id=workspace.id, agent_id=other_agent.id, name="OTHER_AGENT", value="not-mine-2")
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    secret_put(workspace_id=globex.id, name="GLOBEX", value="not-mine-3")
    assert session_environment(session_id=session.id) == {}


def test_a_file_secret_is_a_0600_file_outside_the_working_tree(session):
    key = "-----BEGIN KEY-----\nabc\n-----END KEY-----\n"
    secret_set(session=session, name="DEPLOY_KEY", value=key, as_file=True)
    environment = session_environment(session_id=session.id)
    path = environment["DEPLOY_KEY"]
    assert run_with(environment, "-c", "import os; print(open(os.environ['DEPLOY_KEY']).read(), end='')") == key
    mode = os.stat(path).st_mode
    assert stat.S_IMODE(mode) == 0o600 and os.stat(path).st_uid == os.getuid()
    assert stat.S_IMODE(os.stat(secret_files_directory(session.id)).st_mode) == 0o700
    for root in (session.directory, session.temp_directory):
        assert not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


def test_a_deleted_file_secret_leaves_no_file(session):
    secret = secret_set(session=session, name="DEPLOY_KEY", value="key-material-1", as_file=True)
    path = session_environment(session_id=session.id)["DEPLOY_KEY"]
    assert os.path.exists(path)
    secret_delete(secret_id=secret.id, workspace_id=session.workspace_id)
    assert session_environment(session_id=session.id) == {}
    assert not os.path.exists(path)


def test_a_link_planted_at_the_file_is_not_followed(session, tmp_path):
    secret_set(session=session, name="DEPLOY_KEY", value="key-material-2", as_file=True)
    directory = secret_files_directory(session.id)
    directory.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (directory / ".DEPLOY_KEY.partial").symlink_to(victim)
    path = session_environment(session_id=session.id)["DEPLOY_KEY"]
    assert victim.read_text() == "untouched"
    assert open(path).read() == "key-material-2" and not os.path.islink(path)


def test_the_nearest_place_wins_whatever_order_they_were_set_in(session, workspace):
    secret_set(session=session, name="TOKEN", value="from-session")
    secret_put(workspace_id=workspace.id, agent_id=session.agent_id, name="TOKEN", value="from-agent")
    secret_put(workspace_id=workspace.id, agent_id=session.agent_id, name="AGENT_FIRST", value="from-agent")
    secret_put(workspace_id=workspace.id, name="TOKEN", value="from-workspace")
    secret_put(workspace_id=workspace.id, name="AGENT_FIRST", value="from-workspace")
    environment = session_environment(session_id=session.id)
    assert (environment["TOKEN"], environment["AGENT_FIRST"]) == ("from-session", "from-agent")
