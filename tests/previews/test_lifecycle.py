"""When previews end without unpreview: their session stopped, their host deleted, their expiry
passed (the selector stops serving at once; the beat's sweep, run by a real worker, marks them
ended). And what the proxy reads on every request: one query."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from calvin.audit.models import AuditEvent
from calvin.previews.models import Preview
from calvin.previews.selectors import PreviewRoute, preview_route
from calvin.previews.tasks import sweep_previews
from calvin.workspaces.models import Member
from sessions.hosts import host_delete
from sessions.services import session_start
from sessions.turns import session_stop
from tests.conftest import wait_for
from tests.previews.support import LayerHost, preview_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session(workspace):
    return session_start(workspace=workspace, owner=Member.objects.get(workspace=workspace), title="t")


@pytest.fixture
def host(session):
    layer_host = LayerHost(name="lifecycle-host", workspace=session.workspace)
    layer_host.seat(session)
    yield layer_host
    layer_host.stop()


def test_the_route_is_the_live_preview_in_one_query(session, host):
    preview = preview_of(session, "app", port=5173, access="members")
    with CaptureQueriesContext(connection) as queries:
        route = preview_route(name="app")
    assert len(queries) == 1
    assert route == PreviewRoute(
        id=preview.id,
        name="app",
        session_id=session.id,
        workspace_id=session.workspace_id,
        port=5173,
        host_id=host.host.id,
        access="members",
        expires_at=None,
    )
    assert preview_route(name="ghost") is None
    Preview.objects.filter(id=preview.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert preview_route(name="app") is None  # expired: not served, swept or not
    Preview.objects.filter(id=preview.id).update(expires_at=timezone.now() + timedelta(hours=1))
    assert preview_route(name="app").id == preview.id
    Preview.objects.filter(id=preview.id).update(removed_at=timezone.now())
    assert preview_route(name="app") is None


def test_the_route_query_uses_the_live_name_index(session):
    for i in range(200):
        preview_of(session, f"p{i}", removed_at=timezone.now())
    preview_of(session, "app")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE previews_preview")
        query = Preview.objects.live().filter(name="app").values_list("id").query
        sql, params = query.sql_with_params()
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("SET enable_seqscan = on")
    assert "preview_live_name" in plan, plan


def test_a_stopped_session_ends_its_previews(session, host, make_agent):
    mine = preview_of(session, "mine")
    other = make_agent()
    theirs = preview_of(other.session, "theirs")
    assert session_stop(session_id=session.id, member=None, via="web") == "the agent is not running"
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.removed_reason == "session_stopped" and theirs.removed_at is None
    assert AuditEvent.objects.filter(verb="preview.remove", target_id=str(mine.id)).count() == 1
    wait_for(lambda: host.pushes(session.id) == [[]])


def test_a_deleted_host_ends_the_previews_of_its_sessions(session, host, workspace):
    preview = preview_of(session, "on-host")
    elsewhere = session_start(workspace=workspace, owner=Member.objects.get(workspace=workspace), title="u")
    unaffected = preview_of(elsewhere, "elsewhere")
    assert host_delete(host_id=host.host.id)
    preview.refresh_from_db()
    unaffected.refresh_from_db()
    assert preview.removed_reason == "host_deleted" and unaffected.removed_at is None
    assert AuditEvent.objects.filter(verb="preview.remove", target_id=str(preview.id)).exists()


def test_the_sweep_marks_expired_previews_ended(session, celery_worker):
    gone = preview_of(session, "gone", expires_at=timezone.now() - timedelta(minutes=1))
    later = preview_of(session, "later", expires_at=timezone.now() + timedelta(hours=1))
    forever = preview_of(session, "forever")
    sweep_previews.delay()  # the worker's run (no result backend: its effect is what shows)
    wait_for(lambda: Preview.objects.filter(id=gone.id, removed_at__isnull=False).exists(), timeout=30)
    gone.refresh_from_db()
    assert gone.removed_reason == "expired" and gone.removed_by == "its expiry passed"
    assert AuditEvent.objects.filter(verb="preview.remove", target_id=str(gone.id)).count() == 1
    assert Preview.objects.live().filter(id__in=[later.id, forever.id]).count() == 2
    assert sweep_previews() == 0  # once


def test_the_beat_runs_the_sweep(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["previews-sweep"]
    assert entry["task"] == sweep_previews.name


def test_a_turn_message_carries_the_ports_of_the_sessions_live_previews(session):
    from sessions.models import Runner
    from sessions.turn_messages import turn_message

    preview_of(session, "a", port=5173)
    preview_of(session, "b", port=5173)
    preview_of(session, "c", port=3000)
    preview_of(session, "d", port=4000, removed_at=timezone.now())
    preview_of(session, "e", port=4001, expires_at=timezone.now() - timedelta(seconds=1))
    runner = Runner.objects.create(session=session, generation=1, token_digest="x" * 64, token_hint="x")
    from sessions.models import Turn

    turn = Turn.objects.create(session=session)
    message = turn_message(session=session, turns=[turn], runner=runner, token=None)
    assert message["previews"] == [3000, 5173]
