"""Streams kept between requests (calvin/previews/stream_pool.py), over real HTTP with the
light host: reused for the same session's port, never for another session's, not after the
server said close, retried once for a safe request when the server had closed, closed idle."""

import asyncio

import httpx2 as httpx
import pytest

from calvin.previews import stream_pool
from calvin.workspaces.models import Member
from sessions.models import Session
from sessions.services import session_start
from tests.conftest import wait_for
from tests.previews.support import preview_of
from tests.previews.test_proxy import address, fetch

pytestmark = pytest.mark.django_db(transaction=True)


def opened_for(light, session) -> list[dict]:
    return [message for message in light.opened if message["session"] == session.id]


def test_requests_to_one_preview_share_one_stream_to_its_server(gateway, seated, upstream):
    session, light, _ = seated
    preview_of(session, "kept", port=upstream.port)
    for number in range(5):
        response = fetch(gateway, "kept", f"/nothing-{number}")
        assert response.status_code == 404 and response.text == "no such page here"
    assert [seen["path"] for seen in upstream.seen] == [f"/nothing-{number}" for number in range(5)]
    assert len(opened_for(light, session)) == 1


def test_a_stream_kept_for_one_session_never_carries_another_sessions_request(gateway, seated, upstream, workspace):
    session, light, host = seated
    owner = Member.objects.filter(workspace=workspace).first()
    other = session_start(workspace=workspace, owner=owner, title="other")
    Session.objects.filter(id=other.id).update(host=host)
    preview_of(session, "mine", port=upstream.port)
    preview_of(other, "theirs", port=upstream.port)  # the same port number, in another sandbox
    for name in ("mine", "theirs", "mine", "theirs"):
        assert fetch(gateway, name).status_code == 200
    assert len(opened_for(light, session)) == 1
    assert len(opened_for(light, other)) == 1


def test_a_server_that_says_close_gets_a_new_stream_next_time(gateway, seated, upstream):
    session, light, _ = seated
    preview_of(session, "closer", port=upstream.port)
    for _ in range(2):
        response = fetch(gateway, "closer", "/close")
        assert response.status_code == 200 and response.text == "closing"
    assert len(opened_for(light, session)) == 2


def test_bytes_after_a_response_are_never_the_next_requests_answer(gateway, seated, upstream):
    session, light, _ = seated
    preview_of(session, "extra", port=upstream.port)
    assert fetch(gateway, "extra", "/extra").text == "mine"
    response = fetch(gateway, "extra", "/")
    assert response.text == "<h1>hello from the sandbox</h1>"
    assert len(opened_for(light, session)) == 2


def test_a_get_on_a_stream_whose_server_hung_up_goes_again_on_a_new_one(gateway, seated, upstream):
    session, light, _ = seated
    preview_of(session, "again", port=upstream.port)
    assert fetch(gateway, "again").status_code == 200
    light.servers_hang_up_unseen()
    response = fetch(gateway, "again")
    assert response.status_code == 200 and response.text == "<h1>hello from the sandbox</h1>"
    assert len(opened_for(light, session)) == 2
    assert len(upstream.seen) == 2


def test_a_post_on_a_stream_whose_server_hung_up_is_not_sent_twice(gateway, seated, upstream):
    session, light, _ = seated
    preview_of(session, "once", port=upstream.port)
    assert fetch(gateway, "once").status_code == 200
    light.servers_hang_up_unseen()
    response = fetch(gateway, "once", "/upload", method="POST", content=b"order one pizza")
    assert response.status_code == 502
    assert "went away" in response.text
    assert [seen["path"] for seen in upstream.seen] == ["/"]  # the POST reached no server
    assert len(opened_for(light, session)) == 1
    assert fetch(gateway, "once").status_code == 200  # the next request opens a new stream


def test_an_idle_stream_is_closed_after_its_time(gateway, seated, upstream, monkeypatch):
    monkeypatch.setattr(stream_pool, "IDLE_SECONDS", 0.3)
    session, light, _ = seated
    preview_of(session, "idle", port=upstream.port)
    assert fetch(gateway, "idle").status_code == 200
    stream = opened_for(light, session)[0]["stream"]
    wait_for(lambda: stream in light.resets, timeout=5)
    assert fetch(gateway, "idle").status_code == 200
    assert len(opened_for(light, session)) == 2


def test_requests_at_once_each_have_a_stream_and_at_most_the_limit_are_kept(gateway, seated, upstream):
    session, light, _ = seated
    preview_of(session, "many", port=upstream.port)
    base, port = address(gateway)

    async def burst(count: int) -> list[int]:
        async with httpx.AsyncClient(headers={"host": f"many.preview.localhost:{port}"}, timeout=30) as client:
            answers = await asyncio.gather(*(client.get(base + f"/slow/{n}") for n in range(count)))
        return [answer.status_code for answer in answers]

    count, kept = stream_pool.MAX_IDLE_PER_PORT + 4, stream_pool.MAX_IDLE_PER_PORT
    assert asyncio.run(burst(count)) == [200] * count  # each takes 0.5 s: all in flight at once
    assert len(opened_for(light, session)) == count
    wait_for(lambda: len(light.resets) == count - kept, timeout=5)  # the rest were closed
    assert asyncio.run(burst(count)) == [200] * count
    assert len(opened_for(light, session)) == count + (count - kept)
