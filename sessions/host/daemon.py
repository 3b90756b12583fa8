"""The host daemon: one per machine, one websocket out to the gateway, a runner per session.

It holds its host token and nothing else of the gateway's (no database, no Redis). Over the
connection it registers, heartbeats, runs the turns it is given, streams what the agents do,
and answers host-local requests (send_file's bytes, checkout_repo's and spawn_thread's git
work). What must not be lost (a turn's end) waits in an outbox across reconnects.
"""

import asyncio
import contextlib
import json
import logging
from collections import deque
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from sessions.host.files import file_read_answer
from sessions.host.inbox import InboxClient
from sessions.host.preview_streams import PreviewStreams, preview_probe_answer, session_connector
from sessions.host.runner import SessionRunner
from sessions.host.sandbox import MIRRORS_MODE, Sandbox, private_directory

log = logging.getLogger("calvin.host")

VERSION = "1"
MCP_PATHS = {"calvin": "/mcp", "nanoclaw": "/mcp/nanoclaw"}
UNAUTHORIZED = 4401
MAX_MESSAGE = 16 * 1024 * 1024
MAX_QUEUED_EVENTS = 1000


class HostRefused(Exception):
    """The gateway refused this host's token (unknown or revoked)."""


class HostUnsandboxed(Exception):
    """bwrap does not work here and the operator did not allow agents without it."""


def _raise_if_refused(ws) -> None:
    """The gateway closed with 4401, whatever was under way: the read loop, or the register sent
    as the gateway's close arrived. Read from the close frame received: ws.close_code stays None
    until the TCP connection is gone too, and a refused host would go on retrying."""
    refusal = ws.protocol.close_rcvd
    if refusal is not None and refusal.code == UNAUTHORIZED:
        raise HostRefused(refusal.reason or "the gateway refused this host's token (unknown or revoked)")


class HostDaemon:
    def __init__(
        self,
        *,
        gateway: str,
        token: str,
        name: str,
        capacity: int,
        state_dir: Path,
        hide=(),
        agent_uid: int = 65534,
        agent_gid: int = 65534,
        allow_unsandboxed: bool = False,
    ):
        base = gateway.rstrip("/")
        self.mcp_base = base
        self.ws_url = ("wss://" if base.startswith("https://") else "ws://") + base.split("://", 1)[1] + "/ws/host/"
        self.token, self.name, self.capacity = token, name, capacity
        self.state_dir = state_dir
        self.sessions_root = state_dir / "sessions"
        self.temp_root = state_dir / "tmp"
        self.secrets_root = state_dir / "secrets"
        self.agents_root = state_dir / "agents"
        self.homes_root = state_dir / "homes"
        for root in (self.sessions_root, self.temp_root, self.secrets_root, self.agents_root, self.homes_root):
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.sandbox = Sandbox.probe(hide=[state_dir, *hide], agent_uid=agent_uid, agent_gid=agent_gid)
        self.allow_unsandboxed = allow_unsandboxed
        self.runners: dict[int, SessionRunner] = {}
        self.turn_sessions: dict[int, int] = {}  # running turn -> its session
        self.tasks: set[asyncio.Task] = set()
        self.outbox: deque[dict] = deque()
        self.outbox_ready = asyncio.Event()
        self.heartbeat_seconds = 10.0
        self.connected = asyncio.Event()
        self._ws = None
        self._send_lock = asyncio.Lock()
        self.preview_connect = session_connector(runners=self.runners, sessions_root=self.sessions_root)
        self.previews: PreviewStreams | None = None  # the streams of the connection up now

    # The connection

    async def run(self) -> None:
        """Connect, and reconnect with backoff, until the gateway refuses the token."""
        backoff = 0.5
        if self.sandbox.kind != "bwrap":
            # Refused before it registers: no turn is ever given to it, and its operator (not a
            # person in a thread, who could do nothing about it) is told what to do.
            if not self.allow_unsandboxed:
                raise HostUnsandboxed(
                    f"no working sandbox on this host ({self.sandbox.why}); agents would see the host as this"
                    " daemon's user does. Install bubblewrap (apt-get install bubblewrap), or set"
                    " CALVIN_ALLOW_UNSANDBOXED=1 to run agents with process isolation only"
                )
            log.warning(
                "no bubblewrap sandbox on this host (%s): agents run with process isolation only"
                " (CALVIN_ALLOW_UNSANDBOXED=1)",
                self.sandbox.why,
            )
        while True:
            try:
                async with connect(
                    self.ws_url,
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                    max_size=MAX_MESSAGE,
                    open_timeout=10,
                    # No permessage-deflate: zlib over every 64 KiB preview frame cost the daemon
                    # more CPU than everything else it does for a preview request.
                    compression=None,
                ) as ws:
                    backoff = 0.5
                    try:
                        await self._serve(ws)
                    finally:
                        _raise_if_refused(ws)
            except HostRefused:
                raise
            except InvalidStatus as exc:
                log.warning("the gateway answered %s; retrying", exc.response.status_code)
            except (OSError, ConnectionClosed, TimeoutError) as exc:
                log.warning("connection to the gateway lost (%s); retrying", exc)
            self.connected.clear()
            self._ws = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _serve(self, ws) -> None:
        self._ws = ws
        await self._send(
            {
                "type": "register",
                "name": self.name,
                "capacity": self.capacity,
                "version": VERSION,
                "sandbox": self.sandbox.kind,
                "running": self._turns_to_keep(),
                "runners": [
                    {"session": session_id, "generation": runner.generation}
                    for session_id, runner in self.runners.items()
                    if runner.generation is not None
                ],
            }
        )
        writer = asyncio.create_task(self._write_outbox())
        heartbeat = asyncio.create_task(self._heartbeat())
        self.previews = previews = PreviewStreams(
            send=self._send, send_data=self._send_data, connect=self.preview_connect
        )
        try:
            async for raw in ws:
                if isinstance(raw, bytes):
                    previews.data(raw)  # a preview stream's bytes
                    continue
                try:
                    message = json.loads(raw)
                except (TypeError, ValueError):
                    continue
                if isinstance(message, dict):
                    await self._handle(message)
        finally:
            writer.cancel()
            heartbeat.cancel()
            await previews.close()

    def _turns_to_keep(self) -> list[int]:
        """The turns registering reports as this host's: those running, and those that ended
        while the connection was down, whose turn.finished waits in the outbox to be sent next.
        Left out, the gateway would take them for lost in a restart and run them again."""
        ended = {m["turn"] for m in self.outbox if m.get("type") == "turn.finished"}
        return sorted(set(self.turn_sessions) | ended)

    async def _send(self, message: dict) -> None:
        async with self._send_lock:
            await self._ws.send(json.dumps(message))

    async def _send_data(self, frame: bytes) -> None:
        async with self._send_lock:
            await self._ws.send(frame)

    def post(self, message: dict) -> None:
        """Queue a message for the gateway; it is sent when connected, in order."""
        if message.get("type") == "turn.event":
            if sum(1 for m in self.outbox if m.get("type") == "turn.event") >= MAX_QUEUED_EVENTS:
                return  # live events are a view; a turn's end is never dropped
        self.outbox.append(message)
        self.outbox_ready.set()

    async def _write_outbox(self) -> None:
        while True:
            await self.outbox_ready.wait()
            while self.outbox:
                message = self.outbox[0]
                await self._send(message)  # a failure leaves it first in the outbox
                self.outbox.popleft()
            self.outbox_ready.clear()

    async def _heartbeat(self) -> None:
        # The gateway's interval arrives with "registered": a first sleep of the default 10 s
        # outlasted a lapse set below it, and the live host was swept and then refused.
        await self.connected.wait()
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            await self._send({"type": "heartbeat"})

    # What the gateway sends

    async def _handle(self, message: dict) -> None:
        kind = message.get("type")
        if kind == "registered":
            self.heartbeat_seconds = float(message.get("heartbeat_seconds") or 10.0)
            self.connected.set()
        elif kind == "turn":
            self._spawn(self._run_turn(message))
        elif kind == "stop":
            self._spawn(self._stop(message))
        elif kind == "request":
            self._spawn(self._answer(message))
        elif isinstance(kind, str) and kind.startswith("stream.") and self.previews is not None:
            self.previews.handle(message)
        elif kind == "session.previews":
            self._spawn(self._previews_told(message))
        elif kind == "session.agents_md":
            self._agents_md(message)
        elif kind in ("closing", "error"):
            log.warning("gateway: %s", message.get("reason") or message.get("error"))

    async def _previews_told(self, message: dict) -> None:
        """The ports of a session's live previews: its sandbox is kept after a turn while any."""
        session, ports = message.get("session"), message.get("ports")
        runner = self.runners.get(session) if isinstance(session, int) else None
        if runner is not None and isinstance(ports, list):
            await runner.previews_update(ports)

    def _agents_md(self, message: dict) -> None:
        """A workspace's definition changed: rewrite AGENTS.md in those of its sessions whose
        directory is on this host; others are ignored."""
        text = message.get("text")
        sessions = message.get("sessions")
        if not isinstance(text, str) or not isinstance(sessions, list):
            return
        for session_id in sessions:
            if not isinstance(session_id, int) or isinstance(session_id, bool):
                continue
            runner = self.runners.get(session_id)
            if runner is None and (self.sessions_root / f"session-{session_id}").is_dir():
                runner = self._runner(session_id)  # a session this host ran before it restarted
            try:
                if runner is not None:
                    runner.agents_md_update(text, message.get("at"))
            except OSError as exc:
                log.warning("AGENTS.md of session %s could not be written: %s", session_id, exc)

    def _spawn(self, coroutine) -> None:
        task = asyncio.create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _runner(self, session_id: int) -> SessionRunner:
        runner = self.runners.get(session_id)
        if runner is None:
            runner = SessionRunner(
                session_id=session_id,
                sessions_root=self.sessions_root,
                temp_root=self.temp_root,
                secrets_root=self.secrets_root,
                sandbox=self.sandbox,
                emit=self._emit,
                homes_root=self.homes_root,
                gateway=self.mcp_base,
                egress_root=self.state_dir / "egress",
                inbox=InboxClient(gateway=self.mcp_base, token=self.token),
                git_state_dir=self.state_dir,
            )
            self.runners[session_id] = runner
        return runner

    async def _emit(self, message: dict) -> None:
        self.post(message)

    async def _run_turn(self, message: dict) -> None:
        turn_id, session_id = message.get("turn"), message.get("session")
        if not isinstance(turn_id, int) or not isinstance(session_id, int):
            return
        runner = self._runner(session_id)
        self.turn_sessions[turn_id] = session_id
        message["mcp_servers"] = {
            name: self.mcp_base + MCP_PATHS[name] for name in message.get("tool_sets", []) if name in MCP_PATHS
        }
        timeout = float(message.get("timeout") or 3600)
        try:
            extra_path, prefix = await self._environment(message)
            reveal = [prefix] if prefix else []
            if isinstance(message.get("workspace"), int):
                # checkout_repo's checkouts borrow objects from the workspace's mirrors: read-only,
                # and the whole directory, so a mirror cloned during the turn shows too.
                mirrors = self.state_dir / "git" / f"workspace-{message['workspace']}"
                reveal.append(private_directory(mirrors, mode=MIRRORS_MODE))
            turn = runner.run_turn(
                message, extra_path=extra_path, reveal=reveal, agent_directory=self._agent_directory(message)
            )
            finished = await asyncio.wait_for(turn, timeout)
        except TimeoutError:
            await runner.stop()
            finished = _finished(turn_id, "failed", f"the turn ran longer than {timeout:g} s and was stopped")
        except Exception as exc:  # a runner bug must still end the turn, or the session would hang
            log.exception("turn %s failed on this host", turn_id)
            finished = _finished(turn_id, "failed", f"the host could not run the turn: {exc}")
        finally:
            self.turn_sessions.pop(turn_id, None)
        self.post(finished)

    def _agent_directory(self, message: dict) -> Path | None:
        """The agent's own directory on this host (NanoClaw's group folder): every session of
        the agent here gets it, read-write; no other agent's session sees it."""
        agent = message.get("agent")
        if not isinstance(agent, int) or isinstance(agent, bool):
            return None
        return private_directory(self.agents_root / f"agent-{agent}" / "workspace")

    async def _environment(self, message: dict) -> tuple[list[str], Path | None]:
        """The agent's packages, built before its start when their version changed: the bin
        directories for its PATH, and the prefix its sandbox shows it (read-only)."""
        spec = message.get("environment")
        if not isinstance(spec, dict) or not isinstance(spec.get("agent"), int):
            return [], None
        from sessions.host.environment import environment_ensure

        prefix = self.agents_root / f"agent-{spec['agent']}" / "env"
        result = await environment_ensure(
            prefix=prefix,
            version=int(spec.get("version") or 0),
            apt=[p for p in spec.get("apt", []) if isinstance(p, str)],
            npm=[p for p in spec.get("npm", []) if isinstance(p, str)],
        )
        if not result.ok:
            text = f"The agent's packages could not be built; it runs with its previous environment. {result.error}"
            self.post({"type": "turn.event", "turn": message["turn"], "event": {"kind": "error", "text": text}})
            message["prompt"] = f"[system] {text}\n\n{message.get('prompt', '')}"
            message["environment_built"] = False  # the runner does not tell the agent they are in
        return list(result.bin_dirs), prefix

    async def _stop(self, message: dict) -> None:
        session_id = message.get("session")
        if not isinstance(session_id, int):
            session_id = self.turn_sessions.get(message.get("turn"))
        runner = self.runners.get(session_id) if isinstance(session_id, int) else None
        if runner is not None:
            await runner.stop()

    async def _answer(self, message: dict) -> None:
        """Answered on the connection it came on; if that drops, the gateway's wait times out."""
        try:
            op = message.get("op")
            if op == "file.read":
                await file_read_answer(
                    request=message,
                    sessions_root=self.sessions_root,
                    temp_root=self.temp_root,
                    send=self._send,
                    sandboxed=self.sandbox.kind == "bwrap",
                )
            elif op == "git.checkout":
                from sessions.host.git import git_checkout_answer

                await git_checkout_answer(
                    request=message,
                    state_dir=self.state_dir,
                    sessions_root=self.sessions_root,
                    sandbox=self.sandbox,
                    send=self._send,
                )
            elif op == "preview.probe":
                # A probe made for a preview just published carries the session's ports: taken in
                # before the answer, so the agent's turn cannot end (and its sandbox with it)
                # before this host knows the session has a preview to keep.
                await self._previews_told(message)
                await preview_probe_answer(request=message, connect=self.preview_connect, send=self._send)
            elif op == "git.brief":
                from sessions.host.git import git_brief_answer

                await git_brief_answer(
                    request=message, state_dir=self.state_dir, sessions_root=self.sessions_root, send=self._send
                )
            else:
                await self._send(
                    {"type": "reply", "request": message.get("request"), "ok": False, "error": "unknown request"}
                )
        except (ConnectionClosed, AttributeError):
            log.warning("the connection dropped while answering a %s request", message.get("op"))

    async def close(self) -> None:
        """Stop every runner's agent (SIGTERM to the daemon ends its sessions' processes too)."""
        await asyncio.gather(*(runner.stop() for runner in self.runners.values()), return_exceptions=True)
        for task in list(self.tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            if self._ws is not None:
                await self._ws.close()


def _finished(turn_id: int, status: str, error: str) -> dict:
    return {"type": "turn.finished", "turn": turn_id, "status": status, "reply": "", "error": error}
