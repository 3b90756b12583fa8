"""preview against a real host daemon (`manage.py host`, its own process and directory): a
`command` agent starts an HTTP server in its bubblewrap sandbox, and the host's probe through
the sandbox's door says whether the port listens. Stopping the session ends the preview."""

import sys

import pytest

from calvin.previews.models import Preview
from sessions.models import Runner, Session, Turn
from sessions.tokens import token_digest, token_new
from sessions.turns import session_stop
from tests.conftest import Agent as AgentClient
from tests.conftest import text_of, wait_for
from tests.sessions.host_processes import commanded, wait_connected
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db(transaction=True)

SERVER = """
import http.server, time, threading
class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"hello")
    def log_message(self, *a): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 5173), Page)
threading.Thread(target=server.serve_forever, daemon=True).start()
time.sleep(60)
"""


def runner_of(session: Session, gateway: str) -> AgentClient:
    """Another token of the running session's, as its agent would call with (the daemon keeps its own)."""
    token = token_new()
    runner = Runner.objects.create(
        session=session, host=session.host, generation=99, token_digest=token_digest(token), token_hint=token[:10]
    )
    return AgentClient(session=session, runner=runner, token=token, url=f"{gateway}/mcp")


def test_the_real_hosts_probe_through_the_sandbox(hosts, gateway, workspace, celery_worker, settings):
    settings.CALVIN_MODE = "hosted"
    session = new_session(workspace)
    commanded(session.agent, [sys.executable, "-c", SERVER])
    host = hosts("preview-real-host")
    wait_connected(host)
    say(session, "serve")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.RUNNING).exists(), timeout=30)
    session.refresh_from_db()
    agent = runner_of(session, gateway)

    def listening() -> bool:
        result = agent.call("preview", {"port": 5173, "name": "real-app"})
        assert not result.is_error, text_of(result)
        return result.structured_content["listening"]

    wait_for(listening, timeout=20, interval=0.5)
    result = agent.call("preview", {"port": 5174})
    assert not result.is_error, text_of(result)
    assert result.structured_content["listening"] is False  # nothing there, in this sandbox
    assert sorted(Preview.objects.live().values_list("port", flat=True)) == [5173, 5174]

    session_stop(session_id=session.id, via="web")
    assert not Preview.objects.live().exists()
    assert set(Preview.objects.values_list("removed_reason", flat=True)) == {"session_stopped"}
