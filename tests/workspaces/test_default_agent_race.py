"""A workspace's first sessions starting at once share one default agent."""

import threading

import pytest
from django.db import connection

from calvin.workspaces.models import Agent
from calvin.workspaces.services import agent_default_for, workspace_create

pytestmark = pytest.mark.django_db(transaction=True)


def _all_at_once(workspace, count: int = 4) -> tuple[list[int], list[Exception]]:
    barrier = threading.Barrier(count)
    found, errors = [], []

    def take():
        try:
            barrier.wait()
            found.append(agent_default_for(workspace).id)
        except Exception as exc:  # what the test is about: none may escape
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found, errors


def test_concurrent_first_sessions_make_one_default_agent(django_user_model):
    owner = django_user_model.objects.create_user("racer")
    for round_ in range(3):
        workspace = workspace_create(name=f"Race {round_}", slug=f"race-{round_}", owner_user=owner)
        Agent.objects.filter(workspace=workspace).delete()
        found, errors = _all_at_once(workspace)
        assert not errors, errors
        assert len(set(found)) == 1 and len(found) == 4
        assert Agent.objects.filter(workspace=workspace).count() == 1
