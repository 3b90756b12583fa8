"""ncl's own rules, without a gateway: help and usage, the address it is given, and what it does
with answers no gateway of Calvin's should give (a redirect, HTML, a dropped connection, a 5xx)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ncl.client import NclError, api_base
from ncl.commands import CATALOG
from tests.ncl.conftest import ncl
from tests.support.ports import free_port


class StandIn(BaseHTTPRequestHandler):
    """Answers with the server's `script`: one (status, headers, body) per request, the last repeated;
    a None entry closes the connection without an answer. Records what each request carried."""

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.server.seen.append({"path": self.path, "method": self.command, "headers": dict(self.headers),
                                 "body": self.rfile.read(length)})  # fmt: skip
        script = self.server.script
        step = script[min(len(self.server.seen), len(script)) - 1]
        if step is None:
            self.close_connection = True
            self.connection.close()
            return
        status, headers, body = step
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def stand_in():
    servers = []

    def start(*script) -> tuple[str, ThreadingHTTPServer]:
        server = ThreadingHTTPServer(("127.0.0.1", free_port()), StandIn)
        server.script, server.seen = list(script), []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}", server

    yield start
    for server in servers:
        server.shutdown()


def api_json(status: int, body: dict) -> tuple[int, dict, bytes]:
    kind = "application/json" if status < 400 else "application/problem+json"
    return status, {"Content-Type": kind}, json.dumps(body).encode()


def test_help_names_every_resource_and_verb_and_usage_errors_exit_2():
    shown = ncl("help")
    assert shown.code == 0
    for resource in CATALOG.resources:
        assert resource.name in shown.out
        own = ncl(resource.name, "help")
        assert own.code == 0 and all(verb.name in own.out for verb in resource.verbs), own.out
    assert ncl("help", "groups").out == ncl("agents", "help").out  # NanoClaw's name for an agent
    assert ncl().code == 2 and "resources:" in ncl().err
    assert ncl("sessions").code == 2
    for wrong in (("nothing", "list"), ("sessions", "frobnicate"), ("sessions", "get"), ("sessions", "get", "abc"),
                  ("sessions", "get", "0"), ("sessions", "get", "-3"), ("sessions", "get", str(2**63)),
                  ("sessions", "list", "--bogus"), ("help", "nothing")):  # fmt: skip
        ran = ncl(*wrong, url="http://127.0.0.1:9", token="cpt_x")
        assert ran.code == 2, (wrong, ran)
        assert ran.err.startswith("ncl: ") and "Traceback" not in ran.err, ran.err
    assert "ncl sessions help" in ncl("sessions", "get", "abc", url="http://127.0.0.1:9", token="t").err


def test_the_gateway_and_token_must_be_given_and_the_address_be_the_gateways():
    assert "CALVIN_URL" in ncl("me", token="cpt_x").err
    assert ncl("me", token="cpt_x").code == 2
    assert "CALVIN_TOKEN" in ncl("me", url="http://127.0.0.1:9").err
    for bad in ("ftp://gw/", "gw:8000", "http://user:pw@gw/", "http://gw/?x=1", "javascript:alert(1)"):
        ran = ncl("me", url=bad, token="cpt_x")
        assert ran.code == 2 and "--url" in ran.err, (bad, ran)
    for given in ("http://gw:8000", "http://gw:8000/", "http://gw:8000/api/v1", "http://gw:8000/api/v1/"):
        assert api_base(given) == "http://gw:8000/api/v1"
    assert api_base("https://calvin.example/prefix/") == "https://calvin.example/prefix/api/v1"
    with pytest.raises(NclError):
        api_base("http:///api/v1")


def test_an_unreachable_gateway_exits_6(stand_in):
    ran = ncl("me", url=f"http://127.0.0.1:{free_port()}", token="cpt_x")
    assert ran.code == 6 and "cannot reach the gateway" in ran.err, ran.err
    url, _ = stand_in((502, {"Content-Type": "text/html"}, b"<h1>Bad gateway</h1>"))
    ran = ncl("agents", "list", url=url, token="cpt_x")
    assert ran.code == 6 and "not answering (502)" in ran.err, ran.err


def test_a_redirect_is_not_followed_so_the_token_stays_with_the_gateway(stand_in):
    elsewhere, thief = stand_in(api_json(200, {"items": [], "next_cursor": None}))
    url, _ = stand_in((302, {"Location": elsewhere + "/api/v1/agents"}, b""))
    ran = ncl("agents", "list", url=url, token="cpt_secret-token")
    assert ran.code == 6 and "redirected" in ran.err, ran.err
    assert thief.seen == []


def test_an_answer_that_is_not_the_apis_json_says_so(stand_in):
    url, _ = stand_in((200, {"Content-Type": "text/html"}, b"<html>a login page</html>"))
    ran = ncl("me", url=url, token="cpt_x")
    assert ran.code == 6 and "not the API's JSON" in ran.err and "is the URL right" in ran.err, ran.err
    url, _ = stand_in(
        (500, {"Content-Type": "application/problem+json"}, b'{"detail": "boom", "code": "server_error"}')
    )
    ran = ncl("me", url=url, token="cpt_x")
    assert ran.code == 1 and "boom" in ran.err


def test_a_post_whose_connection_drops_is_sent_again_with_the_same_idempotency_key(stand_in):
    url, server = stand_in(None, api_json(200, {"status": "done", "detail": "stopped 1 turn", "approval": None}))
    ran = ncl("sessions", "stop", "7", url=url, token="cpt_x")
    assert ran.code == 0 and ran.out.strip() == "done: stopped 1 turn", ran
    keys = [seen["headers"].get("Idempotency-Key") for seen in server.seen]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("ncl-")
    assert [seen["path"] for seen in server.seen] == ["/api/v1/sessions/7/stop"] * 2
    assert all(seen["headers"]["Authorization"] == "Bearer cpt_x" for seen in server.seen)

    url, server = stand_in(None)
    ran = ncl("sessions", "stop", "7", url=url, token="cpt_x")
    assert ran.code == 6 and "dropped the connection twice" in ran.err, ran.err


def test_problems_map_to_exit_codes_and_json_mode_prints_the_problem(stand_in):
    cases = [(404, "not_found", 4), (403, "forbidden", 5), (401, "unauthenticated", 5), (409, "not_decided", 5),
             (422, "invalid", 2), (429, "rate_limited", 5)]  # fmt: skip
    for status, code, exit_code in cases:
        problem = {"status": status, "code": code, "detail": f"said with {status}", "title": "x", "type": "x"}
        url, _ = stand_in(api_json(status, problem))
        ran = ncl("approvals", "get", "3", "--json", url=url, token="cpt_x")
        assert ran.code == exit_code, (status, ran)
        assert f"said with {status}" in ran.err and json.loads(ran.out)["code"] == code
    url, _ = stand_in(api_json(202, {"status": "approval-pending", "detail": "a person decides", "approval": 41}))
    ran = ncl("sessions", "stop", "3", url=url, token="cpt_x")
    assert ran.code == 3 and "approval 41" in ran.out
