"""One session's runner on its host: prepares the session directory and runs each turn's agent.

The agent runs in a clean environment (never the host's own, which holds the host token),
in a process group of its own, under resource limits, inside the sandbox where there is
one. A turn ends when the agent's main process ends; what it left running ends with it.
Stop ends the whole tree: SIGTERM, then SIGKILL after a grace.
"""

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from sessions.host.agent_servers import agent_servers
from sessions.host.code_channel import code_channel_checkout
from sessions.host.egress import EgressPolicy, EgressProxy, gateways_of, proxy_environment
from sessions.host.inbox import InboxClient, inbox_deliver
from sessions.host.preview_streams import PreviewRefused, Streams, door_connect, door_listen, door_remove
from sessions.host.providers import LINE_LIMIT, REPO, Outcome, Provider, ProviderError, provider_for
from sessions.host.sandbox import Sandbox, limit_resources, private_directory, write_private
from sessions.host.stream_json import bounded, usage_added

STOP_GRACE = 3.0
DRAIN_TIMEOUT = 5.0
KEPT_DRAIN_TIMEOUT = 0.3  # a kept sandbox holds the agent's output open: what it wrote is read by then
KEPT_STOP_GRACE = 1.0
STDERR_TAIL = 2000
INSTRUCTIONS_FILE = "CLAUDE.md"
AGENTS_FILE = "AGENTS.md"
MCP_CONFIG_FILE = ".mcp.json"
AGENT_DIRECTORY_VARIABLE = "CALVIN_AGENT_DIR"
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]
# Claude Code's login, copied into a session's private home when the agent runs as another user.
CLAUDE_LOGIN_FILES = (".claude/.credentials.json", ".claude.json")


def _stat_fields(pid: int) -> list[str] | None:
    """state, ppid, pgrp, session, ... of a process (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses


def alive(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def process_tree(leader: int, known: set[int] = frozenset()) -> set[int]:
    """The agent's live processes: its process group and session (they outlive their
    parents), every descendant (under bwrap the agent runs in a session of its own, below
    bwrap), and those `known` from an earlier look (a child that left the session and lost
    its parent since)."""
    parents, members = {}, set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is None or fields[0] in ("Z", "X"):
            continue
        pid, ppid, pgrp, session = int(entry), int(fields[1]), int(fields[2]), int(fields[3])
        parents[pid] = ppid
        if leader in (pgrp, session) or pid == leader or pid in known:
            members.add(pid)
    ancestors = members | {leader}  # a dead leader's children still name it as their parent
    while children := {pid for pid, ppid in parents.items() if ppid in ancestors and pid not in members}:
        members |= children
        ancestors |= children
    return members


def signal_tree(leader: int, sig: int, seen: set[int]) -> set[int]:
    """Signal the tree; `seen` collects every process found, for the next round."""
    pids = process_tree(leader, seen)
    seen |= pids
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    try:
        os.killpg(leader, sig)  # members forked since the scan
    except (ProcessLookupError, PermissionError):
        pass
    return pids


async def end_tree(leader: int, grace: float = STOP_GRACE) -> None:
    """SIGTERM to the whole tree; SIGKILL to what is left after `grace` seconds.

    Without bwrap, a process that put itself in a new session after its parent ended is out
    of reach (nothing ties it to the agent any more); bwrap's pid namespace leaves none.
    """
    loop = asyncio.get_running_loop()
    deadline, seen = loop.time() + grace, set()
    while grace > 0 and signal_tree(leader, signal.SIGTERM, seen) and loop.time() < deadline:
        await asyncio.sleep(0.05)  # signalled again each round: children forked meanwhile get it too
    for _ in range(100):
        if not signal_tree(leader, signal.SIGKILL, seen):
            return
        await asyncio.sleep(0.02)


async def exited(process: asyncio.subprocess.Process) -> int:
    """The main process's exit status, as soon as it ends: `Process.wait()` also waits for
    the pipes to close, which a child it left running may hold open."""
    while process.returncode is None:
        await asyncio.sleep(0.02)
    return process.returncode


async def agent_exited(process: asyncio.subprocess.Process, report: int | None) -> tuple[int, bool]:
    """The agent's exit status, and whether the forwarder said it (then the sandbox is still
    up); else the main process's own status once it ends."""
    if report is not None:
        os.set_blocking(report, False)
        said = b""
        while process.returncode is None and len(said) < 16:
            try:
                chunk = os.read(report, 16)
            except BlockingIOError:
                await asyncio.sleep(0.02)
                continue
            if not chunk:
                break  # the forwarder is gone without a word
            said += chunk
            if said.endswith(b"\n") and said[:-1].lstrip(b"-").isdigit():
                return int(said), True
    return await exited(process), False


async def _tail(stream: asyncio.StreamReader, limit: int = STDERR_TAIL) -> str:
    kept = b""
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-limit:]
    return kept.decode(errors="replace").strip()


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if stdin is None:
        return
    try:
        if data:
            stdin.write(data)
            await stdin.drain()
        stdin.close()
        await stdin.wait_closed()
    except (OSError, RuntimeError):
        pass  # the agent did not read its prompt: its own business


class SessionRunner:
    def __init__(
        self,
        *,
        session_id: int,
        sessions_root: Path,
        temp_root: Path,
        secrets_root: Path,
        sandbox: Sandbox,
        emit: Callable[[dict], Awaitable[None]],
        claude_home: Path | None = None,
        homes_root: Path | None = None,
        gateway: str = "",
        egress_root: Path | None = None,
        inbox: InboxClient | None = None,
        git_state_dir: Path | None = None,
    ):
        self.session_id = int(session_id)
        self.directory = Path(sessions_root) / f"session-{self.session_id}"
        self.temp_directory = Path(temp_root) / f"session-{self.session_id}"
        self.secrets_directory = Path(secrets_root) / f"session-{self.session_id}"
        self.sandbox = sandbox
        self.emit = emit
        # Claude Code keeps its login and transcripts under the host user's HOME.
        self.claude_home = Path(claude_home) if claude_home else Path.home()
        # Where an agent that runs as its own user gets a private home (a place the sandbox hides).
        self.home_directory = Path(homes_root or Path(secrets_root).parent / "homes") / f"session-{self.session_id}"
        # The gateway the agent always reaches; its egress proxy's socket (one 0700 directory).
        self.gateway = gateway
        egress_root = Path(egress_root or Path(secrets_root).parent / "egress")
        self.egress_socket = egress_root / f"session-{self.session_id}.sock"
        self._egress_socket: Path | None = None  # while a turn's proxy listens
        # The door of previews (egress_forwarder.py): its socket, beside the egress proxy's.
        self.door_socket = egress_root / f"session-{self.session_id}.door"
        self._door: Path | None = None  # while a sandbox holds the listening door
        self.previews: set[int] = set()  # the session's live previews' ports (the gateway says)
        self._kept: asyncio.subprocess.Process | None = None  # a sandbox kept after its turn
        self._kept_ports: list[int] = []
        self.generation: int | None = None
        self.busy = False
        self._token = ""
        self._calvin_mcp_url = ""  # the turn's calvin server: what calvin-send-file calls from any directory
        # What the last turn ran with (packages, the agent's MCP servers): a turn that runs with more
        # or fewer tells the agent first, since an approval in another session changed them.
        self._equipment: tuple[frozenset, frozenset, frozenset] | None = None
        self._started_servers: set[str] = set()
        self._process: asyncio.subprocess.Process | None = None
        self._stop_requested = False
        self._stopped = False  # stop() found the agent still running (or not yet started)
        self._agents_md: tuple[float, str] | None = None  # the newest AGENTS.md: (composed at, text)
        self._agent_directory: Path | None = None  # the agent's own, kept across its sessions
        self.inbox = inbox  # where files sent to the agent come from (the gateway, as this host)
        # The host's state directory, whose repository cache a code channel's checkout uses (as checkout_repo's).
        self.git_state_dir = Path(git_state_dir) if git_state_dir else None

    async def run_turn(self, turn: dict, *, extra_path=(), reveal=(), agent_directory: Path | None = None) -> dict:
        """Run one turn's agent; returns the turn.finished message.

        `extra_path` goes first on the agent's PATH; `reveal` names directories the sandbox
        shows read-only although they lie under a hidden place (an agent's package prefix,
        whole, when `extra_path` names its bin directories). `extra_path` is revealed too.
        `agent_directory` is the agent's own persistent directory on this host: shown
        read-write, named by $CALVIN_AGENT_DIR.
        """
        number = turn.get("turn")
        if self.busy:
            return self._finished(number, Outcome("failed", error="This session's runner is already running a turn"))
        self.busy, self._stop_requested, self._stopped = True, False, False
        self._agent_directory = Path(agent_directory) if agent_directory else None
        try:
            if isinstance(turn.get("previews"), list):
                self.previews = {p for p in turn["previews"] if isinstance(p, int) and not isinstance(p, bool)}
            stopped = await self.kept_end()  # the next turn has a sandbox of its own
            if stopped:
                ports = ", ".join(map(str, stopped))
                note = (
                    f"[system] Your preview servers (port{'s' if len(stopped) > 1 else ''} {ports}) stopped with the"
                    " previous turn's sandbox; start them again if they are still wanted."
                )
                turn = {**turn, "prompt": f"{note}\n\n{turn.get('prompt') or ''}"}
            async with self._egress(turn):
                outcome = await self._run(turn, number, list(extra_path), [*extra_path, *reveal])
        finally:
            self.busy, self._process = False, None
        if self._stop_requested:
            await self.kept_end()  # a stop that came as the turn ended
        if self._stopped:
            outcome = Outcome("stopped", agent_session_id=outcome.agent_session_id, usage=outcome.usage)
        return self._finished(number, outcome)

    @contextlib.asynccontextmanager
    async def _egress(self, turn: dict):
        """The turn's egress proxy, on a socket only its sandbox is shown. Without bwrap there
        is no network namespace to hold the agent, so no proxy either."""
        if self.sandbox.kind != "bwrap":
            yield
            return
        gateways = gateways_of([self.gateway, *(turn.get("mcp_servers") or {}).values()])
        proxy = EgressProxy(policy=EgressPolicy.from_turn(turn.get("egress")), gateways=gateways)
        private_directory(self.egress_socket.parent)
        await proxy.start(self.egress_socket)
        self._egress_socket = self.egress_socket
        try:
            yield
        finally:
            self._egress_socket = None
            await proxy.close()

    async def stop(self) -> bool:
        """End the running turn's whole process tree, and a kept sandbox; False when no turn
        was running."""
        await self.kept_end()
        if not self.busy:
            return False
        self._stop_requested = True
        process = self._process
        if process is None or process.returncode is None:
            self._stopped = True
        if process is not None and process.returncode is None:
            await end_tree(process.pid)
        return True

    async def previews_update(self, ports) -> None:
        """The session's live previews changed: a kept sandbox ends once it has none."""
        self.previews = {port for port in ports if isinstance(port, int) and not isinstance(port, bool)}
        if not self.previews:
            await self.kept_end()

    async def kept_end(self) -> list[int]:
        """End the sandbox kept after a turn for its previews; the ports it served."""
        process, self._kept = self._kept, None
        if process is None:
            return []
        self._door = None  # the door is the kept sandbox's (a next turn makes its own after this)
        door_remove(self.door_socket)
        await end_tree(process.pid, grace=KEPT_STOP_GRACE)
        with contextlib.suppress(TimeoutError, ProcessLookupError):
            await asyncio.wait_for(process.wait(), DRAIN_TIMEOUT)
        return self._kept_ports

    async def preview_connect(self, port) -> Streams:
        """A connection to 127.0.0.1:<port> in this session's running sandbox, through its
        door only; PreviewRefused says why not."""
        if self.sandbox.kind != "bwrap":
            raise PreviewRefused("no_sandbox", "this host runs agents without a sandbox: it serves no previews")
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise PreviewRefused("not_listening", f"{str(port)[:20]!r} is not a port from 1 to 65535")
        if self._door is None:
            raise PreviewRefused("not_running", "no sandbox of this session is running now")
        return await door_connect(self._door, port)

    def _equipment_changes(self, turn: dict) -> list[str]:
        """What changed in the agent's packages and MCP servers since this session's last turn here."""
        environment = turn.get("environment") or {}
        before = self._equipment
        packages = (frozenset(environment.get("apt") or ()), frozenset(environment.get("npm") or ()))
        if turn.get("environment_built") is False and before is not None:
            packages = before[:2]  # the build failed (the daemon said so): it runs with what it had
        now = (*packages, frozenset(self._started_servers))
        self._equipment = now
        if before is None:  # the runner's first turn: its environment is all it knows
            return []
        notes = []
        kinds = zip(("apt", "npm"), now[:2], before[:2], strict=True)
        added = [f"{kind}: {', '.join(sorted(new - old))}" for kind, new, old in kinds if new - old]
        if added:
            notes.append(
                f"Your environment was rebuilt (version {environment.get('version')}) since your last turn: "
                f"{'; '.join(added)} installed, usable from this turn on."
            )
        if now[2] - before[2]:
            notes.append(
                f"MCP server {', '.join(sorted(now[2] - before[2]))} was added since your last turn: its tools are "
                "yours from this turn on."
            )
        if before[2] - now[2]:
            notes.append(f"MCP server {', '.join(sorted(before[2] - now[2]))} was removed since your last turn.")
        return notes

    def _finished(self, number, outcome: Outcome) -> dict:
        return {
            "type": "turn.finished",
            "turn": number,
            "status": outcome.status,
            "reply": outcome.reply,
            "error": outcome.error,
            "agent_session_id": outcome.agent_session_id,
            **({"usage": outcome.usage} if outcome.usage else {}),
        }

    async def _run(self, turn: dict, number, extra_path: list[str], reveal: list) -> Outcome:
        try:
            self._take_token(turn.get("runner") or {})
            self._calvin_mcp_url = str((turn.get("mcp_servers") or {}).get("calvin") or "")
            secrets = self._prepare(turn)
            prompt = str(turn.get("prompt") or "")
            provider = self._provider(turn, prompt)
            problems = self._write_mcp_config(turn, provider, secrets, extra_path)
            problems += await self._inbox(turn)
            checked_out = await self._code_channel_checkout(turn, number)
            notes = [*checked_out, *problems, *self._equipment_changes(turn)]
            if notes:
                provider = self._provider(turn, "\n".join(f"[system] {n}" for n in notes) + f"\n\n{prompt}")
        except (ProviderError, OSError, RuntimeError) as error:
            return Outcome("failed", error=str(error))
        for problem in problems:
            await self._event(number, {"kind": "error", "text": problem})
        if turn.get("gate"):
            gated = await self._gate(str(turn["gate"]), secrets, number, extra_path, reveal)
            if gated is not None:
                return gated
        outcome = await self._run_process(provider, secrets, number, extra_path, reveal)
        fresh = provider.fresh() if outcome.retry_fresh else None
        if fresh is not None and not self._stop_requested:
            # Resumed elsewhere, the conversation's transcript stays on the host that had it.
            note = "The earlier Claude Code conversation is not on this host; starting a new one."
            await self._event(number, {"kind": "error", "text": note})
            spent = outcome.usage
            outcome = await self._run_process(fresh, secrets, number, extra_path, reveal)
            outcome.usage = usage_added(spent, outcome.usage)
        return outcome

    async def _code_channel_checkout(self, turn: dict, number) -> list[str]:
        """A code channel's repository, checked out before the agent runs (sessions/host/code_channel.py):
        the gateway gets the outcome, the agent a line saying it. Never fails the turn."""
        done = await code_channel_checkout(
            turn.get("checkout"),
            session_id=self.session_id,
            state_dir=self.git_state_dir,
            sessions_root=self.directory.parent,
            sandbox=self.sandbox,
        )
        if done is None:
            return []
        report, told = done
        await self.emit({**report, "turn": number})
        return [told]

    async def _inbox(self, turn: dict) -> list[str]:
        """Files other agents sent, written into the agent's directory before it runs
        (sessions/host/inbox.py); what could not be written, to tell the agent."""
        files = turn.get("inbox")
        if not isinstance(files, list) or not files or self._agent_directory is None or self.inbox is None:
            return []
        return await inbox_deliver(
            agent_directory=self._agent_directory, files=files, client=self.inbox, owner=self.sandbox.agent_owner
        )

    async def _gate(self, script: str, secrets, number, extra_path, reveal) -> Outcome | None:
        """A scheduled task's script, run first in the same sandbox: the agent wakes (None) only
        if its last line of output is {"wakeAgent": true}; otherwise the turn ends here, and costs
        no tokens. A script that fails fails the run."""
        gate = self._provider({"provider": {"kind": "command", "command": ["sh", "-c", script]}}, "")
        ran = await self._run_process(gate, secrets, number, extra_path, reveal)
        if ran.status != "done":
            return Outcome("failed", error=f"the task's script failed: {ran.error}"[:2000])
        lines = [line for line in ran.reply.splitlines() if line.strip()]
        try:
            said = json.loads(lines[-1]) if lines else None
        except ValueError:
            said = None
        if isinstance(said, dict) and said.get("wakeAgent") is True:
            return None
        return Outcome("done", reply='(the task\'s script did not print {"wakeAgent": true}: the agent was not woken)')

    def _provider(self, turn: dict, prompt: str) -> Provider:
        return provider_for(
            turn.get("provider") or {},
            prompt=prompt,
            directory=self.directory,
            temp_directory=self.temp_directory,
            mcp_servers=turn.get("mcp_servers") or {},
            claude_home=self._claude_home(turn),
            sandboxed=self.sandbox.kind == "bwrap",
        )

    def _claude_home(self, turn: dict) -> Path:
        """The host user's home, whose Claude Code login the agent uses; an agent that runs as
        its own user cannot read that (0700, the operator's), so it gets a private home of its
        session with a copy of the login, made afresh each turn. Its transcripts stay there,
        so --resume finds them, and no other session reads them."""
        if not self.sandbox.drops_privileges or (turn.get("provider") or {}).get("kind") != "claude-code":
            return self.claude_home
        home = private_directory(self.home_directory)
        private_directory(home / ".claude")
        for name in CLAUDE_LOGIN_FILES:
            try:
                data = (self.claude_home / name).read_bytes()
            except FileNotFoundError:
                continue
            write_private((home / name).parent, Path(name).name, data, owner=self.sandbox.agent_owner)
        self.sandbox.give_to_agent(home, home / ".claude")
        return home

    def _write_mcp_config(self, turn: dict, provider: Provider, secrets: dict[str, str], extra_path) -> list[str]:
        """.mcp.json (0600: it holds the runner's token): Calvin's servers for the session's
        tool sets, then the agent's own; returns why any of the agent's were left out."""
        servers = {
            name: {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {self._token}"}}
            for name, url in (turn.get("mcp_servers") or {}).items()
        }
        environment = self._environment(provider, secrets, extra_path)
        # A secret the runner's own variables replace (HOME, PATH...) would expand to the wrong value.
        available = {name for name, value in secrets.items() if environment.get(name) == value}
        own, problems = agent_servers(
            turn.get("agent_mcp_servers"), secrets=available, taken=set(servers) | {"calvin", "nanoclaw"}
        )
        self._started_servers = set(own)  # what the agent has this turn (a server left out is not)
        config = json.dumps({"mcpServers": {**servers, **own}}, indent=2)
        write_private(self.directory, MCP_CONFIG_FILE, config, owner=self.sandbox.agent_owner)
        return problems

    def _take_token(self, runner: dict) -> None:
        generation = runner.get("generation")
        if runner.get("token"):
            self.generation, self._token = generation, str(runner["token"])
        elif not self._token or generation != self.generation:
            raise RuntimeError(f"This host holds no token for runner generation {generation} of this session")

    def _prepare(self, turn: dict) -> dict[str, str]:
        """The session directory's instructions, and the secrets; returns the secrets'
        environment."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.directory.is_symlink() or not self.directory.is_dir():
            raise RuntimeError(f"{self.directory} is not a directory of its own")
        private_directory(self.temp_directory)
        private_directory(self.secrets_directory)
        # The agent's own places belong to its user; mounts, not modes, keep sessions apart.
        own = [self.directory, self.temp_directory, self.secrets_directory]
        self.sandbox.give_to_agent(*own, *([self._agent_directory] if self._agent_directory else []))
        if turn.get("instructions"):
            write_private(self.directory, INSTRUCTIONS_FILE, self._instructions(turn["instructions"]), mode=0o644)
        if isinstance(turn.get("agents_md"), str):
            self.agents_md_update(turn["agents_md"], turn.get("agents_md_at"))
        return self._write_secrets(turn.get("secrets") or [])

    def _instructions(self, text) -> str:
        if self._agent_directory is None:
            return str(text)
        return (
            f"{text}\n\n## Your agent's own directory\n\n"
            f"`{self._agent_directory}` (also `${AGENT_DIRECTORY_VARIABLE}`) is yours across your sessions on this "
            "host: keep there what a later session of yours should find. This session's directory is its own.\n"
        )

    def agents_md_update(self, text: str, at=None) -> None:
        """Write AGENTS.md (the workspace's repositories), keeping the newest text: a push of a
        changed definition may arrive before the turn composed earlier is prepared. Rewritten
        each turn either way, so an agent's edit or a planted link does not last."""
        at = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else 0.0
        if self._agents_md is None or at >= self._agents_md[0]:
            self._agents_md = (at, text)
        if self.directory.is_dir() and not self.directory.is_symlink():
            write_private(self.directory, AGENTS_FILE, self._agents_md[1], mode=0o644)

    def _write_secrets(self, secrets: list[dict]) -> dict[str, str]:
        """NAME=value for each secret; a file secret's value goes in a 0600 file outside the
        session directory and NAME holds its path. Files of secrets gone from scope go too."""
        environment, files = {}, set()
        for secret in secrets:
            name, value = str(secret.get("name") or ""), str(secret.get("value") or "")
            if not SECRET_NAME.fullmatch(name):
                raise RuntimeError(f"A secret's name is not a variable name: {name[:40]!r}")
            if secret.get("file"):
                written = write_private(self.secrets_directory, name, value, owner=self.sandbox.agent_owner)
                environment[name] = str(written)
                files.add(name)
            else:
                environment[name] = value
        for stale in self.secrets_directory.iterdir():
            if stale.name not in files:
                stale.unlink()
        return environment

    def _environment(self, provider: Provider, secrets: dict[str, str], extra_path: list[str]) -> dict[str, str]:
        path = [*extra_path, str(REPO / "bin"), os.path.dirname(sys.executable), *SYSTEM_PATH]
        base = {
            "PATH": os.pathsep.join(dict.fromkeys(path)),
            "HOME": str(provider.home or self.directory),
            "TMPDIR": "/tmp" if self.sandbox.kind == "bwrap" else str(self.temp_directory),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
        }
        if self.sandbox.kind == "bwrap":
            base |= proxy_environment()
        if self._agent_directory is not None:
            base[AGENT_DIRECTORY_VARIABLE] = str(self._agent_directory)
        if self.gateway and self._token:  # what `ncl` reads: the API as this agent, within its cli_scope
            base |= {"CALVIN_URL": self.gateway, "CALVIN_TOKEN": self._token}
        if self._calvin_mcp_url and self._token:  # calvin-send-file, wherever in the session it runs
            base |= {"CALVIN_MCP_URL": self._calvin_mcp_url, "CALVIN_TOKEN": self._token}
        return {**secrets, **provider.env, **base}  # a secret cannot replace what the runner sets

    async def _run_process(self, provider: Provider, secrets: dict[str, str], number, extra_path, reveal) -> Outcome:
        if self._stop_requested:
            return Outcome("stopped")
        door = door_listen(self.door_socket) if self._egress_socket is not None else None
        report = list(os.pipe()) if door is not None else None  # the forwarder's word on the agent's exit
        try:
            return await self._run_sandboxed(provider, secrets, number, extra_path, reveal, door, report)
        finally:
            for fd in report or ():
                if fd >= 0:
                    os.close(fd)
            if door is not None:
                door.close()
            if self._kept is None:
                self._door = None
                door_remove(self.door_socket)

    async def _run_sandboxed(self, provider, secrets, number, extra_path, reveal, door, report) -> Outcome:
        argv = self.sandbox.wrap(
            provider.argv,
            directory=self.directory,
            temp_directory=self.temp_directory,
            secrets_directory=self.secrets_directory,
            home_binds=(
                *([provider.home] if provider.home == self.home_directory else []),  # the private home, whole
                *provider.home_binds,
                *([self._agent_directory] if self._agent_directory else []),
            ),
            reveal=(*provider.reveal, *reveal),
            egress_socket=self._egress_socket,
            door_fd=door.fileno() if door is not None else None,
            status_fd=report[1] if report is not None else None,
        )
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if provider.stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.directory,
                env=self._environment(provider, secrets, extra_path),
                start_new_session=True,
                preexec_fn=limit_resources,
                limit=LINE_LIMIT,
                pass_fds=(door.fileno(), report[1]) if door is not None else (),
            )
        except (OSError, ValueError, subprocess.SubprocessError) as error:
            return Outcome("failed", error=f"The agent could not start: {error}")
        self._process = process
        if door is not None:
            # Only the sandbox holds it now: once the sandbox ends, a connection is refused
            # at once rather than left waiting in the backlog.
            door.close()
            os.close(report[1])
            report[1] = -1  # closed: its number may be another's from now on
            self._door = self.door_socket
        tasks: list[asyncio.Future] = []
        try:
            await self.emit(
                {
                    "type": "turn.started",
                    "turn": number,
                    "session": self.session_id,
                    "pid": process.pid,
                    "directory": str(self.directory.resolve()),
                    "temp_directory": str(self.temp_directory.resolve()),
                }
            )
            if self._stop_requested:  # stop() came while the process was being started
                await end_tree(process.pid)
            stderr = asyncio.ensure_future(_tail(process.stderr))
            tasks = [
                stderr,
                asyncio.ensure_future(_feed(process.stdin, provider.stdin)),
                asyncio.ensure_future(provider.consume(process.stdout, lambda e: self._event(number, e))),
            ]
            returncode, said = await agent_exited(process, report[0] if report else None)
            if said and self.previews and not self._stop_requested:
                # Its preview servers go on (the forwarder stays); they may hold its output open.
                self._kept, self._kept_ports = process, sorted(self.previews)
                await self._drain(process, tasks, timeout=KEPT_DRAIN_TIMEOUT, kept=True)
            else:
                # Whatever the agent left running would hold its output open and outlive the turn.
                await end_tree(process.pid, grace=0)
                await self._drain(process, tasks)
        except BaseException:
            await end_tree(process.pid, grace=0)
            for task in tasks:
                task.cancel()
            raise
        outcome = provider.outcome(returncode, bounded(stderr.result(), STDERR_TAIL) if stderr.done() else "")
        outcome.usage = provider.usage()
        return outcome

    async def _drain(
        self, process: asyncio.subprocess.Process, tasks: list[asyncio.Future], timeout=DRAIN_TIMEOUT, kept=False
    ) -> None:
        """Read what the agent wrote before it ended; bounded, because a process that escaped
        the tree (see end_tree), or a kept sandbox's servers, could keep the pipes open."""
        tasks = [*tasks, *([] if kept else [asyncio.ensure_future(process.wait())])]
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        if pending and kept:
            for fd in (0, 1, 2):  # the process goes on: only its pipes are let go
                if (pipe := process._transport.get_pipe_transport(fd)) is not None:
                    pipe.close()
        elif pending:
            process._transport.close()  # no public way to let go of pipes another process holds
        for task in done:
            task.result()  # an emit that failed fails the turn

    async def _event(self, number, event: dict) -> None:
        await self.emit({"type": "turn.event", "turn": number, "event": event})
