"""The proxy's one-statement lookup agrees with the model's own idea of a live preview."""

import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from calvin.previews.admission import preview_admit, route_with_host
from calvin.previews.models import Preview
from calvin.previews.selectors import preview_route
from sessions.hosts import host_create
from sessions.models import Host, Session
from tests.previews.support import preview_of
from tests.sessions.test_hosts import new_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_lookup_finds_exactly_the_live_previews(workspace):
    session = new_session(workspace)
    now = timezone.now()
    removed = preview_of(session, "removed")
    Preview.objects.filter(id=removed.id).update(removed_at=now)
    preview_of(session, "expired", expires_at=now - timedelta(seconds=1))
    preview_of(session, "later", expires_at=now + timedelta(hours=1))
    preview_of(session, "always")
    for name in ("removed", "expired", "later", "always", "never-made"):
        live = Preview.objects.live().filter(name=name).exists()
        found = route_with_host(name)
        assert (found is not None) == live, name
        if found:
            assert found[0] == preview_route(name=name)


def test_the_lookup_names_the_sessions_host_and_its_connection(workspace):
    session = new_session(workspace)
    preview_of(session, "seated")
    assert preview_admit(name="seated").verdict == "offline"  # no host at all
    host, _ = host_create(name="h9", workspace=workspace)
    Session.objects.filter(id=session.id).update(host=host)
    admitted = preview_admit(name="seated")
    assert (admitted.verdict, admitted.host_name) == ("offline", "h9")
    Host.objects.filter(id=host.id).update(channel_name="specific.abc!def")
    admitted = preview_admit(name="seated")
    assert (admitted.verdict, admitted.channel) == ("open", "specific.abc!def")


def test_each_request_counts_toward_its_previews_minute(workspace, settings):
    settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE = 2
    if time.time() % 60 > 55:  # counted per clock minute: start early in one
        time.sleep(61 - time.time() % 60)
    session = new_session(workspace)
    name = f"counted-{uuid.uuid4().hex[:8]}"  # counts outlive a test's rows in Redis: a name of its own
    preview_of(session, name)
    verdicts = [preview_admit(name=name).verdict for _ in range(3)]
    assert verdicts == ["offline", "offline", "limited"]


def test_on_postgresql_and_redis_the_lookups_run_on_the_event_loop_and_agree(workspace):
    import asyncio

    from calvin.previews.admission import AsyncLookups, preview_admit_async

    assert AsyncLookups.usable()  # Django's cache is a proxy: the check must look at the backend itself
    session = new_session(workspace)
    preview_of(session, "async-one")
    preview_of(session, "async-two", expires_at=timezone.now() - timedelta(seconds=1))

    async def both():
        return [await preview_admit_async(name=name) for name in ("async-one", "async-two", "nobody")]

    found = asyncio.run(both())  # this test's own event loop, with lookups of its own
    assert [a.verdict for a in found] == [preview_admit(name="async-one").verdict, "missing", "missing"]
    assert found[0].route == preview_route(name="async-one")


def test_processes_lease_a_previews_requests_and_together_never_pass_its_limit(workspace, settings):
    import asyncio

    from calvin.previews.admission import AsyncLookups, lease_size

    settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE = limit = 1000
    if time.time() % 60 > 50:  # counted per clock minute: start early in one
        time.sleep(61 - time.time() % 60)
    key = f"preview-rate:lease-{uuid.uuid4().hex[:8]}:{int(time.time() // 60)}"
    size = lease_size(limit)
    assert size == 10

    async def admitted_by_three_processes() -> tuple[int, int]:
        processes = [AsyncLookups() for _ in range(3)]
        asked = 0
        for process in processes:
            counted = process.requests_counted

            async def counting(key, by=1, counted=counted):
                nonlocal asked
                asked += 1
                return await counted(key, by)

            process.requests_counted = counting
        admitted = 0
        for turn in range(3 * limit):
            admitted += await processes[turn % 3].within_rate(key)
        return admitted, asked

    admitted, asked = asyncio.run(admitted_by_three_processes())
    assert limit - 3 * size <= admitted <= limit  # leases still held stop it short, never past
    assert asked <= limit // size + 3 + 3  # one round trip per lease, and one refusal each
