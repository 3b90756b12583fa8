"""Cross-site websocket hijacking: only the site's own origin (scheme, host and port) may open a thread socket."""

from urllib.parse import urlsplit

import pytest
from websockets.exceptions import InvalidStatus

from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie, ws_connect

pytestmark = pytest.mark.django_db(transaction=True)


def handshake_status(gateway, thread_id, sessionid, origin) -> int:
    try:
        with ws_connect(gateway, thread_id, sessionid=sessionid, origin=origin) as ws:
            with pytest.raises(TimeoutError):
                ws.recv(timeout=0.3)  # open, and not closed with 4403 either
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def test_only_the_gateways_own_origin_may_open_a_socket(gateway, make_agent):
    thread_id = make_agent().session.thread_id
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    port = urlsplit(gateway).port
    statuses = {
        origin: handshake_status(gateway, thread_id, sessionid, origin)
        for origin in (
            gateway,  # the page's own origin
            "http://localhost:1234",  # an allowed host name, another local app's port
            f"http://127.0.0.1:{port + 1}",  # the same host, another port
            f"https://127.0.0.1:{port}",  # the same host and port, another scheme
            f"http://localhost:{port}",  # an allowed host name, but not the one the page was served from
            f"http://evil.example:{port}",
            "null",
        )
    }
    assert statuses == {
        gateway: 101,
        "http://localhost:1234": 403,
        f"http://127.0.0.1:{port + 1}": 403,
        f"https://127.0.0.1:{port}": 403,
        f"http://localhost:{port}": 403,
        f"http://evil.example:{port}": 403,
        "null": 403,
    }


def test_the_public_urls_origin_is_accepted_exactly(gateway, make_agent, settings):
    """Behind a proxy the browser's origin is the public URL, not the Host uvicorn sees."""
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    thread_id = make_agent().session.thread_id
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    assert handshake_status(gateway, thread_id, sessionid, "https://calvin.example.com") == 101
    assert handshake_status(gateway, thread_id, sessionid, "https://calvin.example.com:443") == 101
    for origin in ("https://calvin.example.com:8443", "http://calvin.example.com", "https://evil.calvin.example.com"):
        assert handshake_status(gateway, thread_id, sessionid, origin) == 403, origin
