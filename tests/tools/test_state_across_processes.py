"""What one web process learns, another knows at once: this test process's gateway and a second
`python -m calvin.http_server` on the same database and Redis.

A runner refused through one is paused on the other; a secret set or replaced by this process
(also with its clock an hour behind) is caught by the other's cached scanner at its next call.
"""

import os
import time
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from secrets_vault.services import secret_set
from tests.conftest import text_of
from tests.reliability.processes import Gateway
from tests.support.celery_processes import subprocess_database_url

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 5


@pytest.fixture
def other_web(django_db_setup, tmp_path):
    """The second web process (same queue, channel and cache prefix as this one's settings)."""
    env = {**os.environ, "DATABASE_URL": subprocess_database_url(), "CALVIN_REFUSALS_PER_MINUTE": str(LIMIT)}
    web = Gateway(env=env, log=tmp_path / "other-web.log")
    yield web
    web.stop()


def card(title: str) -> dict:
    return {"spec": {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": title}, "children": []}}}}


def test_a_runner_refused_through_one_web_process_is_paused_on_the_other(agent, other_web, settings):
    settings.CALVIN_REFUSALS_PER_MINUTE = LIMIT
    if time.time() % 60 > 50:  # refusals are counted per clock minute: start early in one
        time.sleep(61 - time.time() % 60)
    there = replace(agent, url=f"{other_web.url}/mcp")
    assert not there.call("post_card", card("before")).is_error
    for _ in range(LIMIT + 1):
        assert "no file at missing.txt" in text_of(agent.call("send_file", {"path": "missing.txt"}))
    result = there.call("post_card", card("after"))
    assert result.is_error and f"more than {LIMIT} refused calls in a minute" in text_of(result), text_of(result)


def test_secrets_set_here_are_caught_at_once_by_the_other_web_process(agent, other_web, monkeypatch):
    there = replace(agent, url=f"{other_web.url}/mcp")
    values = {name: f"{uuid.uuid4().hex[:12]}-{name.lower()}" for name in ("OLDER", "NEWER", "ADDED", "REPLACED")}
    secret_set(session=agent.session, name="OLDER", value=values["OLDER"])
    secret_set(session=agent.session, name="NEWER", value=values["NEWER"])
    assert not there.call("post_card", card("nothing secret")).is_error  # its scanner is cached there

    secret_set(session=agent.session, name="ADDED", value=values["ADDED"])
    result = there.call("post_card", card(values["ADDED"]))
    assert result.is_error and "the secret ADDED" in text_of(result), text_of(result)

    # Replaced in place (as many secrets as before) by a process whose clock is an hour behind.
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() - timedelta(hours=1))
    secret_set(session=agent.session, name="OLDER", value=values["REPLACED"])
    monkeypatch.setattr(timezone, "now", real_now)
    result = there.call("post_card", card(values["REPLACED"]))
    assert result.is_error and "the secret OLDER" in text_of(result), text_of(result)
