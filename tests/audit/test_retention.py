"""Events older than CALVIN_AUDIT_KEEP_DAYS go, in batches; younger ones stay; the beat runs it."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from calvin.audit.models import AuditEvent
from calvin.audit.services import audit_events_forget
from calvin.audit.tasks import forget_old_audit_events
from tests.audit.conftest import event

pytestmark = pytest.mark.django_db(transaction=True)


def test_only_events_older_than_the_keep_days_go_in_batches(tenants):
    now = timezone.now()
    old = [event(workspace=tenants["acme"], at=now - timedelta(days=30, seconds=i)) for i in range(1, 6)]
    kept = event(workspace=tenants["globex"], at=now - timedelta(days=29, hours=23))
    system_old = event(workspace=None, verb="vault.rotate", at=now - timedelta(days=400))
    assert audit_events_forget(now=now, keep_days=30, batch=2) == 6
    assert list(AuditEvent.objects.values_list("id", flat=True)) == [kept.id]
    assert not AuditEvent.objects.filter(id__in=[e.id for e in old] + [system_old.id]).exists()
    assert audit_events_forget(now=now, keep_days=30, batch=2) == 0


def test_the_beat_has_the_sweep_and_the_default_is_a_year():
    entry = settings.CELERY_BEAT_SCHEDULE["audit-forget"]
    assert entry["task"] == forget_old_audit_events.name == "calvin.audit.tasks.forget_old_audit_events"
    assert settings.CALVIN_AUDIT_KEEP_DAYS == 365


def test_the_task_forgets_in_a_real_worker(tenants, celery_worker, settings):
    settings.CALVIN_AUDIT_KEEP_DAYS = 10
    now = timezone.now()
    old = event(workspace=tenants["acme"], at=now - timedelta(days=11))
    young = event(workspace=tenants["acme"], at=now - timedelta(days=9))
    forget_old_audit_events.delay()
    deadline = time.monotonic() + 20
    while AuditEvent.objects.filter(id=old.id).exists():
        assert time.monotonic() < deadline, "the worker did not forget the old event"
        time.sleep(0.1)
    assert AuditEvent.objects.filter(id=young.id).exists()
