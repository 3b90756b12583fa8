"""The agent's network, for real: curl in a bwrap sandbox, through the forwarder and the host's
egress proxy, to local HTTP servers standing in for an allowed site, the gateway and the host's
own loopback services."""

import http.server
import threading

import pytest

from tests.sessions.host import Roots, a_turn, run_turn, shell


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"page of {self.server.server_address[1]} at {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """Starts local HTTP servers; yields a function returning a new one's port."""
    servers = []

    def start() -> int:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return httpd.server_address[1]

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def curl(url: str, *options: str) -> str:
    """One line per request: the body, or the status line and body of a refusal."""
    return f"curl -sS --max-time 5 {' '.join(options)} {url} 2>&1; echo '=='"


def replies(runner, egress, *commands: str) -> list[str]:
    finished = run_turn(runner, a_turn(shell("; ".join(commands)), egress=egress))
    assert finished["status"] == "done", finished
    return [part.strip() for part in finished["reply"].split("==")][: len(commands)]


def allowlist(*entries, policy="allowlist"):
    return {"policy": policy, "allowlist": list(entries), "workspace": "acme"}


def test_an_allowlisted_name_is_reached_and_others_are_refused_with_the_rule(tmp_path, server):
    allowed, other = server(), server()
    runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap())
    got = replies(
        runner,
        allowlist(f"127.0.0.1:{allowed}", f"localhost:{other}"),
        curl(f"http://127.0.0.1:{allowed}/x"),
        curl(f"http://localhost:{other}/y"),
        curl(f"http://127.0.0.1:{other}/z"),  # the other server, not by the name listed
        curl("https://example.org/"),
        curl(f"http://127.0.0.1:{allowed}/tunnelled", "--proxytunnel"),  # CONNECT, as for https
    )
    assert got[0] == f"page of {allowed} at /x"
    assert got[4] == f"page of {allowed} at /tunnelled"
    assert got[1] == f"page of {other} at /y"
    assert f"calvin egress: 127.0.0.1:{other} refused: 127.0.0.1:{other} is not on workspace acme's allowlist" in got[2]
    # CONNECT refused: curl says the proxy answered 403 (it shows no body of a failed CONNECT).
    assert "403" in got[3], got[3]


def test_a_refused_https_connect_says_the_rule(tmp_path):
    runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap())
    request = "CONNECT example.org:443 HTTP/1.1\\r\\nHost: example.org:443\\r\\n\\r\\n"
    probe = f"printf '{request}' | curl -sS telnet://127.0.0.1:3128 --max-time 3"
    (got,) = replies(runner, allowlist("pypi.org:443"), probe + " 2>&1; echo '=='")
    assert got.startswith("HTTP/1.1 403 Forbidden"), got
    assert got.endswith("calvin egress: example.org:443 refused: example.org:443 is not on workspace acme's allowlist")


def test_open_mode_never_reaches_the_hosts_loopback_or_the_metadata_address(tmp_path, server):
    port = server()
    runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap())
    got = replies(
        runner,
        {"policy": "open", "allowlist": [], "workspace": "acme"},
        curl(f"http://127.0.0.1:{port}/"),
        curl(f"http://localhost:{port}/"),
        curl("http://169.254.169.254/latest/meta-data/"),
        curl(f"http://[::ffff:127.0.0.1]:{port}/"),
    )
    loopback = "loopback addresses of the host are never reachable"
    assert got[0].startswith(f"calvin egress: 127.0.0.1:{port} refused: {loopback}")
    assert f"localhost:{port} refused (localhost resolves to 127.0.0.1): loopback addresses" in got[1]
    assert "169.254.169.254:80 refused: cloud metadata addresses are never reachable" in got[2]
    assert "loopback addresses of the host are never reachable" in got[3]


def test_none_mode_reaches_only_the_gateway(tmp_path, server):
    gateway, other = server(), server()
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap(), gateway=f"http://127.0.0.1:{gateway}")
    got = replies(
        runner,
        {"policy": "none", "allowlist": [f"127.0.0.1:{other}"], "workspace": "acme"},
        curl(f"http://127.0.0.1:{gateway}/mcp"),
        curl(f"http://127.0.0.1:{other}/"),
        curl("http://pypi.org/simple/"),
    )
    assert got[0] == f"page of {gateway} at /mcp"
    refusal = "refused: workspace acme's egress policy is none: only the gateway is reached"
    assert got[1] == f"calvin egress: 127.0.0.1:{other} {refusal}"
    assert got[2] == f"calvin egress: pypi.org:80 {refusal}"


def test_without_the_proxy_there_is_no_route_out(tmp_path, server):
    port = server()
    runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap(), gateway=f"http://127.0.0.1:{port}")
    got = replies(
        runner,
        None,
        curl(f"http://127.0.0.1:{port}/", "--noproxy '*'"),
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; echo ==",
        "ls /run /run/calvin; echo ==",
    )
    assert "Failed to connect" in got[0] or "Couldn't connect" in got[0], got[0]
    assert got[1] == "lo"  # its own namespace: loopback only
    assert got[2].split() == ["/run:", "calvin", "/run/calvin:", "egress.sock"]  # none of the host's sockets


def test_the_agents_exit_status_comes_through_the_forwarder(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    finished = run_turn(runner, a_turn(shell("echo partial; exit 3")))
    assert finished["status"] == "failed" and "exited with status 3" in finished["error"], finished
    finished = run_turn(runner, a_turn(shell("kill -TERM $$"), number=2))
    assert "exited with status 143" in finished["error"], finished  # 128 + SIGTERM, as a shell says
