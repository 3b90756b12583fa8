"""How an agent's process is confined on its host.

With bubblewrap (`bwrap`) the agent sees the system read-only, its own session and secrets
directories, its own temp directory at /tmp, /proc of its own processes only, and nothing of
the places that hold other sessions, the host's own state, logs or the host user's home (each
covered by an empty tmpfs). It runs as an unprivileged user: a daemon running as root has
bwrap set up the mounts and the agent's process then drop to CALVIN_AGENT_UID/GID (no
capabilities, no new privileges), so root-only files stay unreadable; an unprivileged daemon's
bwrap makes a user namespace in which the agent is uid 1000. Its network is a namespace of
its own (loopback only): traffic leaves through the host's egress proxy (egress.py), whose
socket is bound in at /run/calvin/egress.sock. Where bwrap does not work, the
agent still runs with a clean environment, in a process group of its own and under resource
limits; the host says why there is no sandbox (and refuses to run agents unless allowed).
"""

import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sessions.host.egress import FORWARDER_PORT, SANDBOX_SOCKET

REPO = Path(__file__).resolve().parents[2]
FORWARDER = Path(__file__).resolve().parent / "egress_forwarder.py"
# What the agent's tools run with, shown even where it lies under a hidden place (a home):
# the code (bin/calvin-send-file, the script agent) and the Python it runs on.
ALWAYS_SHOWN = (REPO, Path(sys.prefix), Path(sys.base_prefix))
# Inside an unprivileged daemon's user namespace the agent is this uid/gid, never 0.
SANDBOX_UID = 1000
# Shared places that hold other people's state: covered whatever the daemon says.
SYSTEM_PRIVATE = ("/root", "/home", "/run", "/var/log", "/var/mail", "/var/spool", "/var/tmp")
PROBE_ARGS = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-pid",
    "--unshare-net",
    "--die-with-parent",
]
# A workspace's git cache: the agent's user passes through to its mirrors (shown read-only).
MIRRORS_MODE = 0o711
OPEN_FILES = 4096
FILE_SIZE = 8 * 1024**3  # no single file larger than 8 GiB
# Not RLIMIT_AS: node reserves far more virtual memory than it uses.


@dataclass(frozen=True)
class Sandbox:
    kind: str  # "bwrap" or "none"
    hide: tuple[Path, ...] = ()
    why: str = ""  # why there is no bwrap sandbox, for the host's printout
    bwrap: str = ""
    # The outside uid/gid the agent drops to (the daemon runs as root); None: no drop, a user
    # namespace maps the daemon's own uid to SANDBOX_UID.
    agent_uid: int | None = None
    agent_gid: int | None = None
    setpriv: str = ""

    @classmethod
    def probe(cls, hide: list[Path], *, agent_uid: int = 65534, agent_gid: int = 65534) -> "Sandbox":
        """bwrap as the agent will use it; `agent_uid`/`agent_gid` apply when this process is root."""
        hidden = tuple(Path(path) for path in hide)
        bwrap = shutil.which("bwrap")
        if not bwrap:
            return cls.none("bubblewrap (bwrap) is not installed", hide=hidden)
        drop, setpriv = {}, ""
        if os.geteuid() == 0:
            if agent_uid <= 0 or agent_gid <= 0:
                raise ValueError(f"the agent's uid and gid must not be 0 (root): {agent_uid}:{agent_gid}")
            setpriv = shutil.which("setpriv") or ""
            if not setpriv:
                return cls.none("setpriv (util-linux) is not installed: agents would run as root", hide=hidden)
            drop = {"agent_uid": agent_uid, "agent_gid": agent_gid, "setpriv": setpriv}
        # A root daemon's bwrap makes no user namespace (the agent drops to its user instead).
        user = [] if drop else ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        probe_args = [*PROBE_ARGS, *user, "--", *_drop_argv(setpriv, drop), "true"]
        try:
            done = subprocess.run([bwrap, *probe_args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as error:
            return cls.none(f"bwrap could not run: {error}", hide=hidden)
        if done.returncode != 0:
            said = done.stderr.strip()[-300:] or f"exit status {done.returncode}"
            return cls.none(f"bwrap does not work on this host: {said}", hide=hidden)
        return cls(kind="bwrap", hide=hidden, bwrap=bwrap, **drop)

    @classmethod
    def none(cls, why: str, *, hide: tuple[Path, ...] = ()) -> "Sandbox":
        return cls(kind="none", hide=hide, why=why)

    def wrap(
        self,
        argv: list[str],
        *,
        directory: Path,
        temp_directory: Path,
        secrets_directory: Path,
        home_binds=(),
        reveal=(),
        egress_socket: Path | None = None,
        door_fd: int | None = None,
        status_fd: int | None = None,
    ) -> list[str]:
        """The command line that runs `argv` inside the sandbox.

        `home_binds` are shown read-write (Claude Code's login and transcripts); `reveal`
        read-only (a binary or package prefix that lives under a hidden place). The network
        is the sandbox's own (loopback only); with `egress_socket` (the host's egress proxy)
        the forwarder runs in front of `argv`, so HTTP(S)_PROXY leads there. `door_fd` (a
        listening Unix socket the caller passes to the process) makes the forwarder the door
        of previews too (egress_forwarder.py); with `status_fd` (a pipe's writing end) the
        forwarder reports the agent's exit status there and stays until signalled.
        """
        if self.kind != "bwrap":
            return list(argv)
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # The forwarder runs whatever else of the code is shown (a REPO under a hidden /tmp).
        reveal = [*ALWAYS_SHOWN, *reveal, *([FORWARDER] if egress_socket is not None else [])]
        shown = [directory, temp_directory, secrets_directory, *home_binds, *reveal]
        closed = closed_ancestors(shown, owner=self.agent_owner or (os.getuid(), os.getgid()))
        # /tmp is the session's own temp directory, mounted where the host's /tmp was hidden.
        args += _hide_and_reveal([*host_private(), *self.hide, *closed], reveal, tmp=Path(temp_directory).resolve())
        for path in (directory, temp_directory):  # the temp directory at its host name too
            args += [*_way_in(path), "--bind", str(Path(path).resolve()), os.path.abspath(path)]
        secrets = os.path.abspath(secrets_directory)
        args += [*_way_in(secrets), "--ro-bind", str(Path(secrets_directory).resolve()), secrets]
        for path in home_binds:
            if Path(path).exists():
                args += [*_way_in(path), "--bind", str(Path(path).resolve()), os.path.abspath(path)]
        if self.agent_uid is None:
            args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        # Loopback only; /run (hidden above: the host services' sockets) takes the proxy's.
        args += ["--unshare-net"]
        if egress_socket is not None:
            # bwrap makes missing parents 0700, its own: the agent's uid must pass through.
            args += ["--perms", "0755", "--dir", os.path.dirname(SANDBOX_SOCKET)]
            args += ["--bind", str(egress_socket), SANDBOX_SOCKET]
            forwarder = [sys.executable, "-I", "-S", str(FORWARDER), "--socket", SANDBOX_SOCKET]
            door = ["--door", str(door_fd)] if door_fd is not None else []
            door += ["--status", str(status_fd)] if status_fd is not None else []
            argv = [*forwarder, "--port", str(FORWARDER_PORT), *door, "--", *argv]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--die-with-parent", "--new-session", "--chdir", os.path.abspath(directory), "--"]
        drop = _drop_argv(self.setpriv, {"agent_uid": self.agent_uid, "agent_gid": self.agent_gid})
        return [*_once(args), *drop, *argv]

    @property
    def drops_privileges(self) -> bool:
        return self.agent_uid is not None

    @property
    def agent_owner(self) -> tuple[int, int] | None:
        """Who must own what the agent writes (None: the daemon's own user is fine)."""
        return (self.agent_uid, self.agent_gid) if self.agent_uid is not None else None

    def give_to_agent(self, *paths: Path) -> None:
        """Hand the agent's own places to its user (the daemon runs as root); never through a link."""
        if self.agent_uid is None:
            return
        for path in paths:
            os.chown(path, self.agent_uid, self.agent_gid, follow_symlinks=False)


def closed_ancestors(paths, *, owner: tuple[int, int]) -> list[Path]:
    """The outermost directory above each of `paths` that the agent's user cannot pass
    through (a 0700 home, the host's 0700 state directory). Each is covered by an empty tmpfs,
    in which bwrap makes the way to what it shows: nothing the agent could read is lost."""
    uid, gid = owner
    closed = []
    for path in paths:
        for ancestor in reversed(Path(path).resolve().parents[:-1]):  # outermost first, not /
            try:
                info = os.stat(ancestor)
            except OSError:
                break
            bit = 0o100 if info.st_uid == uid else 0o010 if info.st_gid == gid else 0o001
            if not info.st_mode & bit:
                closed.append(ancestor)
                break
    return closed


def _way_in(destination) -> list[str]:
    """bwrap makes a mount's missing parents 0700 (its own): made 0755 first, so that the
    agent's user passes through them (existing ones stay as they are)."""
    args = []
    for parent in reversed(Path(os.path.abspath(destination)).parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _once(args: list[str]) -> list[str]:
    """The bwrap arguments without a `--perms 0755 --dir D` for a D already made (each made
    costs bwrap a few system calls, and many mounts share their ways in)."""
    kept, made, i = [], set(), 0
    while i < len(args):
        if args[i : i + 3] == ["--perms", "0755", "--dir"] and i + 3 < len(args):
            if args[i + 3] not in made:
                made.add(args[i + 3])
                kept += args[i : i + 4]
            i += 4
        else:
            kept.append(args[i])
            i += 1
    return kept


def _drop_argv(setpriv: str, ids: dict) -> list[str]:
    """Inside the sandbox, before the agent: become its user, without groups, capabilities or
    any way back (no_new_privs: a setuid binary of the read-only system gives nothing)."""
    if not setpriv or ids.get("agent_uid") is None:
        return []
    uid, gid = ids["agent_uid"], ids["agent_gid"]
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"] + [
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def host_private() -> list[Path]:
    """Hidden whatever the daemon says: shared scratch places (the agent gets empty private
    ones), the host user's home (keys, cloud logins; Claude Code's login is bound back in)
    and the gateway's settings file, which may sit in the code's directory."""
    places = [Path("/tmp"), *map(Path, SYSTEM_PRIVATE), REPO / ".env"]
    home = Path.home().resolve()
    if len(home.parts) > 1:  # a service user whose home is / keeps it
        places.append(home)
    return places


def _hide_and_reveal(hide: list[Path], reveal: list[Path], *, tmp: Path | None = None) -> list[str]:
    """Mounts, outer places first, so a place revealed inside a hidden one shows, and one
    hidden inside a revealed one (the gateway's var/ in the code's directory) stays hidden.
    `tmp` is bound at /tmp in place of the empty tmpfs."""
    mounts = []
    for path in hide:
        real = Path(path).resolve()
        if tmp is not None and real == Path("/tmp"):
            mounts.append((len(real.parts), 0, ["--bind", str(tmp), "/tmp"]))
        elif real.is_dir():
            mounts.append((len(real.parts), 0, ["--tmpfs", str(real)]))
        elif real.exists():
            mounts.append((len(real.parts), 0, ["--ro-bind", "/dev/null", str(real)]))
    for path in reveal:
        if Path(path).exists():  # at its own name: PATH may name it through a link (current -> v7)
            name = os.path.abspath(path)
            mounts.append((len(Path(name).parts), 1, [*_way_in(name), "--ro-bind", str(Path(path).resolve()), name]))
    return [arg for *_, args in sorted(mounts, key=lambda m: m[:2]) for arg in args]


def limit_resources() -> None:
    """Runs in the agent's process between fork and exec. Hard limits too, so the agent
    cannot raise them again."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = OPEN_FILES if hard == resource.RLIM_INFINITY else min(OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))


def private_directory(path: Path, mode: int = 0o700) -> Path:
    """Make `path` (and missing parents) a real directory, mode 0700 (or `mode`), not a link."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        if path.is_symlink() or not path.is_dir():
            raise RuntimeError(f"{path} is not a directory of its own") from None
    os.chmod(path, mode)
    return path


def write_private(
    directory: Path, name: str, data: str | bytes, mode: int = 0o600, owner: tuple[int, int] | None = None
) -> Path:
    """Write `directory/name` atomically (a reader never sees half of it) and never through
    a link the agent may have planted: a fresh partial file, then a rename over the name."""
    target = directory / name
    partial = directory / f".{name}.partial"
    try:
        os.unlink(partial)  # left by a crash, or planted: never written through
    except FileNotFoundError:
        pass
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask
        if owner is not None:
            os.fchown(fd, *owner)  # the agent's user reads it (the daemon runs as root)
        view = memoryview(data.encode() if isinstance(data, str) else data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(partial, target)
    return target
