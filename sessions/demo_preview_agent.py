"""The "See a preview" demo agent: on any message it serves a page from its sandbox and
answers with the page's preview URL.

    python sessions/demo_preview_agent.py   (the `command` provider: the prompt on stdin,
                                              stdout is the reply; cwd is the session directory)

It writes site/index.html (the person's message, escaped, and the time) into the session
directory, starts `python -m http.server` on PORT in the background, and calls the `preview`
tool through the session's real MCP endpoint (URL and runner token from its .mcp.json). The
same port each time, and no `name`: a later message gets the port's existing URL back.

Runs in the agent's sandbox: only the standard library and the MCP SDK, no Django.
"""

import asyncio
import html
import json
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

PORT = 8765  # not 8000, where `up` itself listens (on a host without a sandbox they would meet)
SITE = Path("site")
SERVER_LOG = Path("site-server.log")  # beside the site, not in it: not served
START_SECONDS = 10

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Made in Calvin's sandbox</title>
<style>
  body {{ margin: 0; min-height: 100vh; display: grid; place-items: center;
         font: 17px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
         background: linear-gradient(135deg, #1e3a8a, #7c3aed); color: #1f2937; }}
  main {{ background: #fff; border-radius: 18px; padding: 2.2rem 2.6rem; max-width: 36rem;
         margin: 1.5rem; box-shadow: 0 20px 50px rgba(0, 0, 0, .25); }}
  h1 {{ margin: 0 0 .4rem; font-size: 1.7rem; }}
  .said {{ white-space: pre-wrap; overflow-wrap: anywhere; background: #f3f4f6;
          border-left: 4px solid #7c3aed; border-radius: 8px; padding: .8rem 1rem; margin: 1.2rem 0; }}
  .small {{ color: #6b7280; font-size: .9rem; }}
</style>
</head>
<body>
<main>
  <h1>Made in Calvin's sandbox</h1>
  <p class="small">A page served by <code>python -m http.server</code> inside the agent's sandbox,
  reached through Calvin's preview proxy.</p>
  <p>You said:</p>
  <div class="said">{message}</div>
  <p class="small">Written at <time datetime="{iso}">{when}</time>.</p>
</main>
</body>
</html>
"""


def person_text(prompt: str) -> str:
    """The prompt without the runner's `[system]` notes (such as "your preview servers stopped")."""
    parts = [part for part in prompt.split("\n\n") if not part.startswith("[system] ")]
    return "\n\n".join(parts).strip()


def page_write(message: str, now: datetime) -> None:
    SITE.mkdir(exist_ok=True)
    page = PAGE.format(
        message=html.escape(message or "(an empty message)"),
        iso=now.isoformat(timespec="seconds"),
        when=now.strftime("%Y-%m-%d %H:%M:%S UTC"),
    )
    (SITE / "index.html").write_text(page, encoding="utf-8")


def listening() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=1):
            return True
    except OSError:
        return False


def server_start() -> subprocess.Popen | None:
    """The page's server, in the background (it outlives this process while the session has
    previews); None when something listens on PORT already."""
    if listening():
        return None
    with SERVER_LOG.open("ab") as log:
        # Its own session and no pipe of ours: the turn's reply does not wait for it.
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(PORT), "--bind", "127.0.0.1", "--directory", str(SITE)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_SECONDS
    while not listening():
        if server.poll() is not None:
            raise RuntimeError(f"the page's server exited with status {server.returncode}: {log_tail()}")
        if time.monotonic() > deadline:
            server.terminate()
            raise RuntimeError(f"the page's server did not listen on port {PORT} within {START_SECONDS} s")
        time.sleep(0.05)
    return server


def log_tail() -> str:
    try:
        return SERVER_LOG.read_text(errors="replace").strip().splitlines()[-1]
    except (OSError, IndexError):
        return "(no output)"


def calvin_server() -> dict:
    server = json.loads(Path(".mcp.json").read_text())["mcpServers"]["calvin"]
    return {"url": server["url"], "headers": server.get("headers") or {}}


def text_of(result) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "text", None))


async def preview_call(server: dict) -> tuple[bool, str, dict]:
    """(refused, text, structured result) of `preview` for PORT."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=server["headers"], timeout=60) as http:
        async with Client(streamable_http_client(server["url"], http_client=http), mode="legacy") as client:
            result = await client.call_tool("preview", {"port": PORT})
            if not result.is_error:
                # Again, for the same name: the host then has had the gateway's news that this
                # session has a preview (it came before this call's probe on the host's one
                # connection), so it keeps the sandbox, and the server, after this turn.
                await client.call_tool("preview", {"port": PORT})
    return bool(result.is_error), text_of(result), result.structured_content or {}


def refusal(text: str) -> str:
    return text.removeprefix("Error executing tool preview: ")


def main() -> int:
    message = person_text(sys.stdin.read())
    server = None
    try:
        page_write(message, datetime.now(UTC))
        server = server_start()
        refused, text, shown = asyncio.run(preview_call(calvin_server()))
    except Exception as error:  # said in the thread: the person sees why, not a stack trace
        refused, text = True, f"{type(error).__name__}: {error}"
    if refused:
        if server is not None:
            # Not published: nothing to keep it for (and without a sandbox it would outlive the turn).
            server.terminate()
        print(f"I could not publish the page: {refusal(text)}")
        return 0
    print(
        f"Your page is live at {shown['url']}\n\n"
        f"It is served from my sandbox (python -m http.server on port {PORT}) and shows what you wrote. "
        "It stays up until the preview is taken down. Send another message to update the page; "
        "the URL stays the same."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
