"""An agent's environment on a host: the apt and npm packages install_packages approved.

Runs in the host daemon (no database, no Django): the daemon passes the agent's package
lists and environment version before each start of its runner. Layout of the prefix:

    <prefix>/current -> v7           the environment in use; the link's target records its version
    <prefix>/v7/npm/node_modules/.bin
    <prefix>/v7/apt/usr/bin ...      apt packages unpacked with dpkg-deb -x (no root, no scripts)
    <prefix>/.build-v8-xxxx/         a build in progress; renamed to v8, then `current` is swapped
    <prefix>.lock                    (beside the prefix) flock: one build of a prefix at a time, across processes

A failed or interrupted build never touches `current`, so the previous environment stays usable.
"""

import asyncio
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# The same patterns as install_packages (tools/services/agents.py), matched whole: bare names,
# no version suffix, nothing that starts with "-" or holds a shell character.
APT_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]*")
NPM_NAME = re.compile(r"(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*")
PACKAGE_NAME_MAX = 214
# install_packages allows 20 per request; an agent's environment is the union of its approved
# requests, so the bound here is on the whole list (it keeps argv and build time bounded).
PACKAGES_MAX = 200

CURRENT = "current"
FAILED = "failed.json"  # the last failed build: its version, why, and when
OUTPUT_KEEP = 64 * 1024  # bytes of a subprocess's output kept while it runs
ERROR_TAIL = 2_000  # characters of that output in an error text
LOCK_POLL = 0.1  # seconds between tries for the build lock (a blocking flock could not be cancelled)

# PATH entries inside the current environment, in PATH order.
BIN_SUBDIRS = (
    "npm/node_modules/.bin",
    "apt/usr/local/bin",
    "apt/usr/bin",
    "apt/bin",
    "apt/usr/games",  # Debian puts games (sl, cowsay) here
)


@dataclass
class EnvironmentResult:
    ok: bool
    version: int  # the version now in use (the previous one when a build failed)
    bin_dirs: list[str]  # what goes on the agent's PATH, first
    error: str  # plain text for the agent and the thread when ok is False


class BuildFailed(Exception):
    """A build step failed; the text is what the agent and the thread are told."""


def environment_bin_dirs(prefix: Path) -> list[str]:
    """The current environment's bin directories that exist (through `current`, so they survive a rebuild)."""
    current = prefix / CURRENT
    return [str(current / sub) for sub in BIN_SUBDIRS if os.path.isdir(current / sub)]


def name_problems(apt: list[str], npm: list[str]) -> list[str]:
    """Checked again here, whatever the gateway did: these names end up in argv."""
    if len(apt) + len(npm) > PACKAGES_MAX:
        return [f"at most {PACKAGES_MAX} packages in an environment (got {len(apt) + len(npm)})"]
    return [
        f"invalid {kind} package name {ascii(name)[:80]}"
        for kind, names, pattern in (("apt", apt, APT_NAME), ("npm", npm, NPM_NAME))
        for name in names
        if not isinstance(name, str) or len(name) > PACKAGE_NAME_MAX or not pattern.fullmatch(name)
    ]


def built_version(prefix: Path) -> int:
    """The version `current` points at; 0 when nothing was built (or the link is not ours)."""
    try:
        target = os.readlink(prefix / CURRENT)
    except OSError:
        return 0
    return int(target[1:]) if re.fullmatch(r"v[0-9]{1,18}", target) else 0


async def environment_ensure(
    *, prefix: Path, version: int, apt: list[str], npm: list[str], timeout: float = 600, retry_after: float = 300
) -> EnvironmentResult:
    """Make `version` the environment in use unless it already is; never leave it half-built.

    A version older than the one built is a stale caller: packages are only ever added, so the
    newer environment stays. A version whose build failed less than `retry_after` seconds ago
    is not built again at once (a registry outage would otherwise cost every start the timeout).
    """
    prefix = Path(prefix)
    in_use = built_version(prefix)
    if version <= in_use or (in_use == 0 and not apt and not npm):
        return _result(prefix, in_use or version)  # the path before every start: a readlink and a few stats
    problems = name_problems(apt, npm)
    if problems:
        return _failure(prefix, in_use, "packages refused: " + "; ".join(problems))
    apt, npm = list(dict.fromkeys(apt)), list(dict.fromkeys(npm))
    deadline = asyncio.get_running_loop().time() + timeout
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        async with _build_lock(prefix.with_name(prefix.name + ".lock"), deadline):
            in_use = built_version(prefix)  # another caller may have built it while this one waited
            if version <= in_use:
                return _result(prefix, in_use)
            recent = _recent_failure(prefix, version, retry_after)
            if recent:
                return _failure(prefix, in_use, recent)
            try:
                await _build(prefix, version, in_use, apt, npm, deadline)
            except (BuildFailed, OSError) as exc:  # OSError: a full disk, a missing npm
                error = str(exc) if isinstance(exc, BuildFailed) else f"the environment could not be built: {exc}"
                _record_failure(prefix, version, error)
                return _failure(prefix, in_use, error)
    except TimeoutError:
        return _failure(prefix, in_use, f"another build of this environment was still running after {timeout:g} s")
    return _result(prefix, version)


def _result(prefix: Path, version: int) -> EnvironmentResult:
    return EnvironmentResult(ok=True, version=version, bin_dirs=environment_bin_dirs(prefix), error="")


def _failure(prefix: Path, in_use: int, error: str) -> EnvironmentResult:
    return EnvironmentResult(ok=False, version=in_use, bin_dirs=environment_bin_dirs(prefix), error=error)


@contextlib.asynccontextmanager
async def _build_lock(path: Path, deadline: float):
    # flock (not fcntl's POSIX locks): it holds between two opens in one process as well.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if asyncio.get_running_loop().time() >= deadline:
                    raise TimeoutError from None
                await asyncio.sleep(LOCK_POLL)
        yield
    finally:
        os.close(fd)  # releases the lock


async def _build(prefix: Path, version: int, in_use: int, apt: list[str], npm: list[str], deadline: float) -> None:
    """Build into a fresh directory, then swap `current` to it with one rename."""
    for leftover in prefix.glob(".build-*"):  # under the lock, any build directory is an interrupted one
        await asyncio.to_thread(shutil.rmtree, leftover, ignore_errors=True)
    build = Path(tempfile.mkdtemp(prefix=f".build-v{version}-", dir=prefix))
    try:
        build.chmod(0o755)  # mkdtemp's 0700 would hide it from an agent that runs as another user
        if npm:
            await _npm_install(build, npm, deadline)
        if apt:
            await _apt_unpack(build, apt, deadline)
        (build / "packages.json").write_text(json.dumps({"version": version, "apt": apt, "npm": npm}) + "\n")
        final = prefix / f"v{version}"
        if final.exists():  # left by a build interrupted between its rename and the swap
            await asyncio.to_thread(shutil.rmtree, final)
        build.rename(final)
    except BaseException:
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, build, ignore_errors=True))
        raise
    link = prefix / f".current-{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(final.name)  # relative: the state directory may be moved or bound elsewhere
    os.replace(link, prefix / CURRENT)
    with contextlib.suppress(FileNotFoundError):
        (prefix / FAILED).unlink()
    # Keep the previous version too: a session started before the swap may still load files from it.
    keep = {final.name, f"v{in_use}"}
    for old in prefix.glob("v*"):
        if old.name not in keep and re.fullmatch(r"v[0-9]+", old.name):
            await asyncio.to_thread(shutil.rmtree, old, ignore_errors=True)


async def _npm_install(build: Path, names: list[str], deadline: float) -> None:
    # --ignore-scripts: a package's install scripts would run here, on the host, outside any sandbox.
    argv = ["npm", "install", "--prefix", str(build / "npm"), "--no-audit", "--no-fund", "--ignore-scripts"]
    argv += ["--no-update-notifier", "--", *names]
    code, output = await _run(argv, deadline)
    if code != 0:
        raise BuildFailed(_failed_text("npm could not install", names, code, output))


async def _apt_unpack(build: Path, names: list[str], deadline: float) -> None:
    """Fetch the packages and the dependencies this machine lacks, then unpack them without root."""
    debs = build / ".debs"
    debs.mkdir()
    argv = ["apt-get", "install", "--download-only", "--no-install-recommends", "-y", "-q"]
    # Our own archive directory and no locks: nothing of the system's package state is touched.
    argv += ["-o", f"Dir::Cache::archives={debs}/", "-o", "Debug::NoLocking=1", "--", *names]
    code, output = await _run(argv, deadline, env={"DEBIAN_FRONTEND": "noninteractive"})
    if code != 0:
        raise BuildFailed(_failed_text("apt could not fetch", names, code, output))
    target = build / "apt"
    target.mkdir()
    for deb in sorted(debs.glob("*.deb")):
        # dpkg-deb -x only unpacks the files: no maintainer scripts, no dpkg database.
        code, output = await _run(["dpkg-deb", "-x", "--", str(deb), str(target)], deadline)
        if code != 0:
            raise BuildFailed(_failed_text(f"dpkg-deb could not unpack {deb.name} for", names, code, output))
    await asyncio.to_thread(_drop_set_id_bits, target)
    await asyncio.to_thread(shutil.rmtree, debs)


def _drop_set_id_bits(root: Path) -> None:
    # Unpacked as root, a package's setuid binaries would keep their bit outside /usr: never wanted here.
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))


def _failed_text(what: str, names: list[str], code: int | None, output: str) -> str:
    # npm's pointer to its own log file names a host path and says nothing the agent can use.
    lines = [line for line in output.splitlines() if "complete log of this run" not in line]
    detail = "\n".join(lines).strip()[-ERROR_TAIL:]
    why = "it did not finish in time" if code is None else f"exit status {code}"
    return f"{what} {', '.join(names)} ({why}):\n{detail}" if detail else f"{what} {', '.join(names)} ({why})"


async def _run(argv: list[str], deadline: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run argv (never a shell) in its own process group; the code is None when the deadline passed.

    Returns the tail of stdout and stderr together. On timeout or cancellation the whole group is
    killed, so a child npm or apt left behind cannot keep running. The output pipe is our own, not
    asyncio's: its wait() would also wait for every holder of the pipe, a child that left the group too.
    """
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            env={**os.environ, **env} if env else None,
        )
    except OSError as exc:
        os.close(read_fd)
        raise BuildFailed(f"{argv[0]} could not start on this host: {exc.strerror or exc}") from None
    finally:
        os.close(write_fd)
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), open(read_fd, "rb", 0))
    kept = bytearray()
    timed_out = finished = False

    async def read_all() -> None:
        while chunk := await reader.read(65536):
            kept.extend(chunk)
            del kept[:-OUTPUT_KEEP]
        await proc.wait()

    try:
        await asyncio.wait_for(read_all(), timeout=max(0.0, deadline - loop.time()))
        finished = True
    except TimeoutError:
        timed_out = True
    finally:
        if not finished:  # timed out or cancelled: the leader may be gone, a child holding the pipe not
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.shield(proc.wait())  # the leader is killed: prompt
        transport.close()
    return (None if timed_out else proc.returncode), kept.decode("utf-8", "replace")


def _recent_failure(prefix: Path, version: int, retry_after: float) -> str:
    try:
        failed = json.loads((prefix / FAILED).read_text())
    except (OSError, ValueError):
        return ""
    if failed.get("version") == version and time.time() - failed.get("at", 0) < retry_after:
        return str(failed.get("error", ""))
    return ""


def _record_failure(prefix: Path, version: int, error: str) -> None:
    (prefix / FAILED).write_text(json.dumps({"version": version, "error": error, "at": time.time()}) + "\n")
