"""Agent providers: what process runs a turn, and how its output becomes events and a reply.

- `claude-code`: the real CLI, headless, stream-json, resumed per turn.
- `command`: any executable (an argument list, never a shell line), the prompt on stdin,
  its stdout the reply.
- `script`: `script_agent` playing a JSON list of MCP calls through the real endpoints.
"""

import asyncio
import json
import shutil
import signal
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from sessions.host.sandbox import REPO, write_private
from sessions.host.stream_json import EVENT_TEXT_LIMIT, ClaudeStream, bounded, result_usage

BUNDLED_CLAUDE = REPO / "var" / "node" / "node_modules" / ".bin" / "claude"
REPLY_LIMIT = 64 * 1024
LINE_LIMIT = 16 * 1024 * 1024  # one stream-json line may carry a whole file a tool read
MODELS = {"smart": "opus", "fast": "haiku"}
NOT_LOGGED_IN = "Claude Code on this host is not logged in: run `claude` once on the host and log in"
NO_CONVERSATION = "No conversation found"
EVENT_KINDS = ("text", "tool_use", "tool_result", "error")


class ProviderError(Exception):
    """The turn cannot start; the message is for people."""


@dataclass
class Outcome:
    status: str  # "done" or "failed"
    reply: str = ""
    error: str = ""
    agent_session_id: str = ""
    retry_fresh: bool = False  # the conversation to resume is not on this host: start a new one
    usage: dict | None = None  # tokens and cost, as the provider reported them (None: it reported nothing)


# The CLI's result subtypes in the thread's words (the subtype stays, in brackets, for operators).
RESULT_WORDS = {
    "error_max_budget_usd": "Claude Code stopped: it spent this turn's budget (its share of the workspace's spend cap)",
    "error_max_turns": "Claude Code stopped: it took as many steps as one turn may",
    "error_during_execution": "Claude Code failed while it worked",
}


def exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


async def read_lines(stream: asyncio.StreamReader):
    """Decoded lines; a line past the reader's limit is dropped (its tail reads as non-JSON)."""
    while True:
        try:
            raw = await stream.readline()
        except ValueError:
            continue
        if not raw:
            return
        yield raw.decode(errors="replace").rstrip("\r\n")


@dataclass
class Provider:
    argv: list[str]
    stdin: bytes | None = None
    home: Path | None = None  # None: the session directory
    home_binds: tuple[Path, ...] = ()  # shown read-write in the sandbox
    reveal: tuple[Path, ...] = ()  # shown read-only in the sandbox
    env: dict[str, str] = field(default_factory=dict)

    async def consume(self, stdout: asyncio.StreamReader, event) -> None:
        raise NotImplementedError

    def outcome(self, returncode: int, stderr_tail: str) -> Outcome:
        raise NotImplementedError

    def fresh(self) -> "Provider | None":
        """The same provider starting a new conversation (only claude-code resumes one)."""
        return None

    def usage(self) -> dict | None:
        """What the turn used, as the agent reported it (a `command` agent reports nothing)."""
        return None


def claude_binary() -> Path | None:
    """The host's `claude` on PATH, else the one scripts/test installs with npm; its real
    file, because the link's own directory may be hidden in the sandbox."""
    found = shutil.which("claude")
    if found:
        return Path(found).resolve()
    return BUNDLED_CLAUDE.resolve() if BUNDLED_CLAUDE.exists() else None


@dataclass
class ClaudeCode(Provider):
    stream: ClaudeStream = field(default_factory=ClaudeStream)
    resuming: bool = False
    fresh_argv: list[str] = field(default_factory=list)

    async def consume(self, stdout, event) -> None:
        async for line in read_lines(stdout):
            for each in self.stream.feed(line):
                await event(each)

    def outcome(self, returncode: int, stderr_tail: str) -> Outcome:
        stream = self.stream
        session_id = stream.session_id
        if stream.not_logged_in:
            return Outcome("failed", error=NOT_LOGGED_IN, agent_session_id=session_id)
        if stream.succeeded:
            return Outcome("done", reply=bounded(stream.result_text, REPLY_LIMIT), agent_session_id=session_id)
        if self.resuming and any(NO_CONVERSATION in error for error in stream.result_errors):
            return Outcome("failed", error="; ".join(stream.result_errors), retry_fresh=True)
        said = "; ".join([stream.result_text, *stream.result_errors]).strip("; ") or stderr_tail
        if stream.errors:
            message = f"Claude Code stopped with an error ({', '.join(stream.errors)})"
        elif stream.result is not None:
            subtype = str(stream.result.get("subtype") or "error")
            message = RESULT_WORDS.get(subtype, "Claude Code failed") + f" ({subtype})"
        else:
            message = f"Claude Code {exit_description(returncode)} without a result"
        return Outcome("failed", error=bounded(f"{message}: {said}" if said else message), agent_session_id=session_id)

    def usage(self) -> dict | None:
        return result_usage(self.stream.result)

    def fresh(self) -> "ClaudeCode | None":
        if not self.resuming:
            return None
        return ClaudeCode(
            argv=self.fresh_argv,
            home=self.home,
            home_binds=self.home_binds,
            reveal=self.reveal,
            env=self.env,
            fresh_argv=self.fresh_argv,
        )


def claude_code_argv(
    binary: str, *, prompt: str, mcp_config: Path, spec: dict, mcp_servers: dict, resume: str = ""
) -> list[str]:
    argv = [binary, "-p", "--output-format", "stream-json", "--verbose", "--mcp-config", str(mcp_config)]
    argv += ["--permission-mode", spec.get("permission_mode") or "default"]
    if "calvin" in mcp_servers:
        argv += ["--permission-prompt-tool", "mcp__calvin__approval_prompt"]
    model = spec.get("model") or "default"
    if model != "default":
        argv += ["--model", MODELS.get(model, model)]
    if resume:
        argv += ["--resume", resume]
    argv += budget_arguments(spec)
    # `--` ends the options: --mcp-config takes several values, and a prompt may start with "-".
    return [*argv, "--", prompt]


def budget_arguments(spec: dict) -> list[str]:
    """The turn's share of the workspace's spend cap (scheduling.py reserved it): the CLI stops
    itself once it has spent that much, so a turn cannot run far past a cap mid-way."""
    budget = spec.get("max_budget_usd")
    try:
        value = float(budget) if budget not in (None, "") else None
    except (TypeError, ValueError):
        value = None
    return ["--max-budget-usd", f"{value:.6f}"] if value is not None and 0 < value < 1e9 else []


def claude_code(spec: dict, *, prompt: str, directory: Path, mcp_servers: dict, home: Path, sandboxed: bool):
    binary = claude_binary()
    if binary is None:
        raise ProviderError("Claude Code is not installed on this host: npm install -g @anthropic-ai/claude-code")
    mcp_config = directory / ".mcp.json"
    resume = spec.get("resume") or ""
    build = partial(
        claude_code_argv, str(binary), prompt=prompt, mcp_config=mcp_config, spec=spec, mcp_servers=mcp_servers
    )
    # Made if missing, so the sandbox can show it read-write and transcripts last for --resume.
    (home / ".claude").mkdir(mode=0o700, exist_ok=True)
    login = (home / ".claude", home / ".claude.json")
    # The CLI refuses bypassPermissions as root unless told it runs in a sandbox, which bwrap is.
    env = {"IS_SANDBOX": "1"} if sandboxed else {}
    # approval_prompt waits for a person up to the gateway's bound: the CLI must not give up first.
    tool_timeout = spec.get("tool_timeout_seconds")
    if isinstance(tool_timeout, int | float) and tool_timeout > 0:
        env["MCP_TOOL_TIMEOUT"] = str(int(tool_timeout * 1000))
    return ClaudeCode(
        argv=build(resume=resume),
        home=home,
        home_binds=login,
        reveal=(binary,),
        env=env,
        resuming=bool(resume),
        fresh_argv=build(resume=""),
    )


@dataclass
class Command(Provider):
    _stdout: bytearray = field(default_factory=bytearray)

    async def consume(self, stdout, event) -> None:
        while chunk := await stdout.read(65536):
            room = REPLY_LIMIT - len(self._stdout)
            if room > 0:
                self._stdout += chunk[:room]  # the rest is read and dropped, so the agent never blocks

    def outcome(self, returncode: int, stderr_tail: str) -> Outcome:
        reply = self._stdout.decode(errors="replace").strip()
        if returncode == 0:
            return Outcome("done", reply=reply)
        message = f"The agent's command {exit_description(returncode)}"
        return Outcome("failed", reply=reply, error=f"{message}: {stderr_tail}" if stderr_tail else message)


def command(spec: dict, *, prompt: str) -> Command:
    argv = spec.get("command")
    if not isinstance(argv, list) or not argv or not argv[0] or not all(isinstance(arg, str) for arg in argv):
        raise ProviderError("The agent's command must be a non-empty list of strings (arguments, not a shell line)")
    return Command(argv=list(argv), stdin=prompt.encode())


@dataclass
class Script(Provider):
    reply: str | None = None
    reported: dict | None = None  # the usage its result line reported

    async def consume(self, stdout, event) -> None:
        async for line in read_lines(stdout):
            try:
                said = json.loads(line)
            except ValueError:
                continue
            if not isinstance(said, dict):
                continue
            kind, text = said.get("kind"), str(said.get("text") or "")
            if kind == "result":
                self.reply = bounded(text, REPLY_LIMIT)
                self.reported = said.get("usage") if isinstance(said.get("usage"), dict) else None
            elif kind == "usage" and isinstance(said.get("usage"), dict):
                await event({"kind": "usage", "usage": said["usage"]})  # spent so far: the gateway may stop it
            elif kind in EVENT_KINDS:
                shown = {"kind": kind, "text": bounded(text, EVENT_TEXT_LIMIT)}
                if kind in ("tool_use", "tool_result"):
                    shown["name"] = str(said.get("name") or "")
                await event(shown)

    def usage(self) -> dict | None:
        return self.reported

    def outcome(self, returncode: int, stderr_tail: str) -> Outcome:
        if returncode == 0 and self.reply is not None:
            return Outcome("done", reply=self.reply)
        message = f"The script agent {exit_description(returncode)}"
        if returncode == 0:
            message = "The script agent ended without a result"
        return Outcome("failed", error=f"{message}: {stderr_tail}" if stderr_tail else message)


SCRIPT_FILE = "calvin-script.json"


def script(spec: dict, *, prompt: str, temp_directory: Path) -> Script:
    text = spec.get("script")
    if not isinstance(text, str) or not text.strip():
        raise ProviderError("The agent's script is empty")
    # Readable by the agent's user (the daemon may run as root); the directory is the session's own.
    path = write_private(temp_directory, SCRIPT_FILE, text, mode=0o644)
    return Script(
        argv=[sys.executable, "-m", "sessions.host.script_agent", str(path)],
        stdin=prompt.encode(),
        env={"PYTHONPATH": str(REPO)},
    )


def provider_for(
    spec: dict,
    *,
    prompt: str,
    directory: Path,
    temp_directory: Path,
    mcp_servers: dict,
    claude_home: Path,
    sandboxed: bool,
) -> Provider:
    kind = spec.get("kind")
    if kind == "claude-code":
        return claude_code(
            spec, prompt=prompt, directory=directory, mcp_servers=mcp_servers, home=claude_home, sandboxed=sandboxed
        )
    if kind == "command":
        return command(spec, prompt=prompt)
    if kind == "script":
        return script(spec, prompt=prompt, temp_directory=temp_directory)
    raise ProviderError(f"Unknown agent provider {kind!r}")
