"""The approvals sweep is on beat's schedule (installed by the DatabaseScheduler beat runs
with), and a new request expires after its workspace's approval timeout, 24 h by default."""

from datetime import timedelta

import pytest
from django.conf import settings
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from calvin.celery import app as celery_app
from tests.approvals.support import _worker_idle_afterwards, requested  # noqa: F401 (an autouse fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_beat_runs_the_approvals_sweep():
    entry = settings.CELERY_BEAT_SCHEDULE["approvals-sweep"]
    celery_app.loader.import_default_modules()  # the task modules, found as a worker finds them
    assert entry["task"] == "approvals.tasks.sweep_approvals" and entry["task"] in celery_app.tasks
    assert 0 < entry["schedule"] <= 60  # expiry is noticed within a minute
    DatabaseScheduler(app=celery_app)  # what `celery -A calvin beat` starts: it installs the schedule
    installed = PeriodicTask.objects.get(name="approvals-sweep")
    assert installed.task == "approvals.tasks.sweep_approvals" and installed.enabled
    assert installed.interval.every == entry["schedule"]


def waits_for(approval) -> timedelta:
    return approval.expires_at - approval.requested_at


def test_a_request_expires_after_the_workspaces_timeout_24_hours_by_default(agent):
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    assert abs(waits_for(approval) - timedelta(hours=24)) < timedelta(seconds=5)
    workspace = agent.session.workspace
    workspace.approval_timeout = timedelta(minutes=5)
    workspace.save(update_fields=["approval_timeout"])
    approval = requested(agent, "install_packages", {"apt": ["curl"]})
    assert abs(waits_for(approval) - timedelta(minutes=5)) < timedelta(seconds=5)
