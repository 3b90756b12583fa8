"""Running git on a host for checkout_repo and spawn_thread: never through a shell, in a
process group of its own that is killed whole at its timeout, with an environment and
settings that let the URL's transport, the host's system config and anything fetched
run no code (hooks, fsmonitor, remote helpers)."""

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

STDERR_TAIL = 1024
STDOUT_LIMIT = 64 * 1024
REAP_TIMEOUT = 5.0
# Given before every command. GIT_ALLOW_PROTOCOL (below) already refuses ext::; the rest
# is code a repository's config or the host user's could otherwise name.
SAFE_CONFIG = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "submodule.recurse=false",
]
USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")


@dataclass(frozen=True)
class GitResult:
    returncode: int | None  # None: killed at its timeout
    stdout: bytes
    stderr: str  # the last STDERR_TAIL bytes, credentials removed

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def why(self, what: str, timeout: float) -> str:
        if self.timed_out:
            return f"{what} timed out after {timeout:g} s"
        return f"{what} failed: {self.stderr or f'exit status {self.returncode}'}"


def redact(text: str) -> str:
    """`https://user:token@host/x` -> `https://host/x`, wherever a URL appears in `text`."""
    return USERINFO_RE.sub(r"\1", text)


def git_environment(allowed_schemes: Sequence[str]) -> dict[str, str]:
    """The daemon's environment without any GIT_* variable (GIT_DIR, GIT_SSH_COMMAND,
    GIT_CONFIG_PARAMETERS… would steer git), plus what keeps git from prompting or reaching
    for a transport the gateway does not allow. The host user's ~/.gitconfig stays: its
    credentials and URL rewrites are how the host reaches private repositories."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_ALLOW_PROTOCOL=":".join(allowed_schemes),
        GIT_CONFIG_NOSYSTEM="1",
        SSH_ASKPASS_REQUIRE="never",  # ssh never pops up a passphrase dialog
        LC_ALL="C",
    )
    return env


async def _keep(stream: asyncio.StreamReader, kept: bytearray, limit: int, tail: bool) -> None:
    """Read to the end (a writer blocked on a full pipe would never exit), keeping at most
    `limit` bytes in `kept`: the first ones, or the last ones when `tail`."""
    while chunk := await stream.read(65536):
        if tail:
            kept += chunk
            del kept[:-limit]
        elif len(kept) < limit:
            kept += chunk[: limit - len(kept)]


async def _exited(process: asyncio.subprocess.Process) -> int:
    """The exit status as soon as git ends: `Process.wait()` may also wait for its pipes,
    which a helper it left behind (an ssh ControlPersist master) can hold open."""
    while process.returncode is None:
        await asyncio.sleep(0.02)
    return process.returncode


async def run_git(
    args: Sequence[str],
    *,
    allowed_schemes: Sequence[str],
    timeout: float,
    wrap: Callable[[list[str]], list[str]] | None = None,
    stdout_limit: int = STDOUT_LIMIT,
) -> GitResult:
    """Run `git <SAFE_CONFIG> <args>`; `wrap` turns the command line into a sandboxed one."""
    argv = ["git", *SAFE_CONFIG, *args]
    if wrap is not None:
        argv = wrap(argv)
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=git_environment(allowed_schemes),
        cwd="/",
        start_new_session=True,
    )
    stdout, stderr = bytearray(), bytearray()
    readers = [
        asyncio.ensure_future(_keep(process.stdout, stdout, stdout_limit, tail=False)),
        asyncio.ensure_future(_keep(process.stderr, stderr, STDERR_TAIL, tail=True)),
    ]
    returncode = None
    try:
        returncode = await asyncio.wait_for(_exited(process), timeout)
    except TimeoutError:
        pass
    finally:
        if process.returncode is None:  # timed out, or the request was cancelled
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # git's helpers (ssh, remote-https) too
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_exited(process), REAP_TIMEOUT)
        _, pending = await asyncio.wait(readers, timeout=REAP_TIMEOUT)
        for reader in pending:
            reader.cancel()
        if pending:
            process._transport.close()  # no public way to let go of pipes another process holds
    return GitResult(returncode, bytes(stdout), redact(stderr.decode(errors="replace").strip()))
