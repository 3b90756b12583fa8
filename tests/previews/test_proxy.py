"""The preview host's ASGI app over real HTTP, against the real gateway and channel layer, with a
light host serving streams from this machine's loopback (tests/previews/light_host.py)."""

import asyncio
import hashlib
import json
import socket
import time
import uuid

import httpx2 as httpx
import pytest
from django.utils import timezone
from websockets.asyncio.client import connect as ws_connect

from sessions.models import Host
from tests.conftest import wait_for
from tests.previews.support import preview_of
from tests.previews.upstreams import EchoUpstream
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def address(gateway: str) -> tuple[str, int]:
    port = int(gateway.rsplit(":", 1)[1])
    return f"http://127.0.0.1:{port}", port


def fetch(gateway: str, name: str, path: str = "/", method: str = "GET", host: str | None = None, **options):
    base, port = address(gateway)
    headers = {"host": host or f"{name}.preview.localhost:{port}", **options.pop("headers", {})}
    return httpx.request(method, base + path, headers=headers, timeout=30, **options)


def test_a_page_reaches_the_server_as_localhost_without_calvins_cookies(gateway, seated, upstream):
    session, _, _ = seated
    preview_of(session, "demo", port=upstream.port)
    cookies = "sessionid=s3cret; csrftoken=t0ken; calvin_preview_access=a; theirs=1"
    response = fetch(gateway, "demo", headers={"cookie": cookies})
    assert response.status_code == 200
    assert response.text == "<h1>hello from the sandbox</h1>"
    assert response.headers["x-robots-tag"] == "noindex"
    seen = upstream.seen[-1]["headers"]
    assert seen["host"] == f"localhost:{upstream.port}"
    assert seen["x-forwarded-host"] == f"demo.preview.localhost:{address(gateway)[1]}"
    assert seen["cookie"] == "theirs=1"


def test_a_preview_sets_only_host_only_cookies_of_its_own(gateway, seated, upstream):
    session, _, _ = seated
    preview_of(session, "cookies", port=upstream.port)
    response = fetch(gateway, "cookies", "/cookies")
    assert response.headers.get_list("set-cookie") == ["own=1; Path=/; HttpOnly"]


@pytest.mark.parametrize(
    "host",
    [
        "DEMO.preview.localhost:{port}",  # uppercase
        "demo.preview.localhost.:{port}",  # a trailing dot
        "demo:80.preview.localhost:{port}",  # a port in the label
        "a.demo.preview.localhost:{port}",  # two labels
        "preview.localhost:{port}",  # the bare domain
        "demo.preview.localhost:x{port}",  # not a port
    ],
)
def test_host_tricks_under_the_preview_domain_get_400_from_the_preview_app(gateway, seated, upstream, host):
    session, _, _ = seated
    preview_of(session, "demo", port=upstream.port)
    response = fetch(gateway, "demo", host=host.format(port=address(gateway)[1]))
    assert response.status_code == 400
    assert "does not name a preview" in response.text  # the preview app's page, not Django's
    assert upstream.seen == []


def test_a_name_followed_by_another_domain_is_not_a_preview(gateway, seated, upstream):
    session, _, _ = seated
    preview_of(session, "demo", port=upstream.port)
    response = fetch(gateway, "demo", host="demo.preview.localhost.evil.com")
    assert response.status_code == 400  # Django's own host check: not an allowed host
    assert upstream.seen == []


def test_unknown_removed_and_expired_previews_are_404(gateway, seated, upstream):
    session, _, _ = seated
    assert fetch(gateway, "nobody").status_code == 404
    removed = preview_of(session, "gone", port=upstream.port)
    removed.removed_at = timezone.now()
    removed.save()
    preview_of(session, "old", port=upstream.port, expires_at=timezone.now())
    assert fetch(gateway, "gone").status_code == 404
    assert fetch(gateway, "old").status_code == 404
    assert upstream.seen == []


def test_nothing_listening_is_a_clear_502(gateway, seated):
    session, _, _ = seated
    port = free_port()  # nothing listens there
    preview_of(session, "idle", port=port)
    started = time.monotonic()
    response = fetch(gateway, "idle")
    assert response.status_code == 502
    assert "server is not running" in response.text
    assert time.monotonic() - started < 5  # not a hang


def test_a_disconnected_host_is_503(gateway, seated, upstream):
    session, light, host = seated
    preview_of(session, "away", port=upstream.port)
    light.stop()
    wait_for(lambda: not Host.objects.get(id=host.id).channel_name)
    response = fetch(gateway, "away")
    assert response.status_code == 503
    assert "light is not connected" in response.text


def test_a_large_body_streams_within_the_window(gateway, seated, upstream):
    session, light, _ = seated
    preview_of(session, "big", port=upstream.port)
    size = 50 * 1024 * 1024
    base, port = address(gateway)
    received = 0
    with httpx.stream("GET", base + f"/big?n={size}", headers={"host": f"big.preview.localhost:{port}"}) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            received += len(chunk)
    assert received == size
    # The host never had more than the stream's window in flight: nothing piles up on the way.
    assert 0 < light.sent_uncredited_max <= light.opened[-1]["window"]


def test_uploads_arrive_whole_with_and_without_a_length(gateway, seated, upstream):
    session, _, _ = seated
    preview_of(session, "up", port=upstream.port)
    body = bytes(range(256)) * (20 * 4096)  # 20 MiB
    expected = {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    assert fetch(gateway, "up", "/upload", method="POST", content=body).json() == expected

    def pieces():
        for start in range(0, len(body), 1 << 20):
            yield body[start : start + (1 << 20)]

    assert fetch(gateway, "up", "/upload", method="POST", content=pieces()).json() == expected


def test_bodies_over_the_limit_are_413(gateway, seated, upstream, settings):
    settings.CALVIN_PREVIEW_MAX_BODY_BYTES = 1000
    session, _, _ = seated
    preview_of(session, "small", port=upstream.port)
    assert fetch(gateway, "small", "/upload", method="POST", content=b"x" * 2000).status_code == 413
    assert upstream.seen == []  # refused on its declared length, before any stream
    chunked = fetch(gateway, "small", "/upload", method="POST", content=iter([b"x" * 600, b"y" * 600]))
    assert chunked.status_code == 413


def test_request_and_response_heads_over_their_limits(gateway, seated, upstream):
    session, _, _ = seated
    preview_of(session, "heads", port=upstream.port)
    assert fetch(gateway, "heads", headers={"x-long": "z" * 40_000}).status_code == 431
    response = fetch(gateway, "heads", "/bighead")
    assert response.status_code == 502
    assert "could not read" in response.text


def test_the_request_rate_per_preview_is_limited(gateway, seated, upstream, settings):
    settings.CALVIN_PREVIEW_REQUESTS_PER_MINUTE = 3
    if time.time() % 60 > 50:  # counted per clock minute: start early in one
        time.sleep(61 - time.time() % 60)
    session, _, _ = seated
    name = f"rate-{uuid.uuid4().hex[:8]}"  # counts outlive a test's rows in Redis: a name of its own
    preview_of(session, name, port=upstream.port)
    other = preview_of(session, f"other-{uuid.uuid4().hex[:8]}", port=upstream.port)
    statuses = [fetch(gateway, name).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    limited = fetch(gateway, name)
    assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60
    assert fetch(gateway, other.name).status_code == 200  # each preview has its own count


def test_server_sent_events_arrive_as_they_are_sent(gateway, seated, upstream):
    session, _, _ = seated
    preview_of(session, "events", port=upstream.port)
    base, port = address(gateway)
    arrivals = []
    with httpx.stream("GET", base + "/events", headers={"host": f"events.preview.localhost:{port}"}) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                arrivals.append(time.monotonic())
    assert len(arrivals) == 3
    assert arrivals[2] - arrivals[0] > 0.8  # each came when sent, not all at the end


def test_a_websocket_echo_through_the_preview(gateway, seated):
    session, _, _ = seated
    echo = EchoUpstream()
    try:
        preview_of(session, "live", port=echo.port)
        _, port = address(gateway)

        async def talk():
            sock = socket.create_connection(("127.0.0.1", port))
            uri = f"ws://live.preview.localhost:{port}/hmr?token=1"
            async with ws_connect(
                uri, sock=sock, subprotocols=["vite-hmr"], additional_headers={"cookie": "sessionid=s3cret; theirs=2"}
            ) as ws:
                assert ws.subprotocol is None or ws.subprotocol == "vite-hmr"
                await ws.send("ping")
                text = await ws.recv()
                await ws.send(b"\x00\x01" * 40_000)
                data = await ws.recv()
                return text, data

        text, data = asyncio.run(talk())
        assert text == "ping" and data == b"\x00\x01" * 40_000
        handshake = {key.lower(): value for key, value in echo.handshakes[-1].items()}
        assert handshake["host"] == f"localhost:{echo.port}"
        assert handshake["cookie"] == "theirs=2"
    finally:
        echo.stop()


def test_the_stream_goes_by_the_channel_layer_when_the_host_is_on_another_web_process(
    gateway, seated, upstream, second_gateway
):
    session, _, _ = seated
    preview_of(session, "across", port=upstream.port)
    response = fetch(second_gateway, "across")
    assert response.status_code == 200
    assert response.text == "<h1>hello from the sandbox</h1>"
    body = json.dumps({"n": 1}).encode() * 50_000
    uploaded = fetch(second_gateway, "across", "/upload", method="POST", content=body).json()
    assert uploaded["size"] == len(body)
