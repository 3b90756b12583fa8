"""How an agent's process is confined on its host.

With bubblewrap (`bwrap`) the agent sees the system read-only, its own session, temp and
secrets directories, and nothing of the places that hold other sessions, the host's own
state or the host user's home (each covered by an empty tmpfs). It keeps the network: it must reach the gateway.
Where bwrap does not work, the agent still runs with a clean environment, in a process
group of its own and under resource limits; the host says why there is no sandbox.
"""

import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What the agent's tools run with, shown even where it lies under a hidden place (a home):
# the code (bin/calvin-send-file, the script agent) and the Python it runs on.
ALWAYS_SHOWN = (REPO, Path(sys.prefix), Path(sys.base_prefix))
PROBE_ARGS = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "true"]
OPEN_FILES = 4096
FILE_SIZE = 8 * 1024**3  # no single file larger than 8 GiB
# Not RLIMIT_AS: node reserves far more virtual memory than it uses.


@dataclass(frozen=True)
class Sandbox:
    kind: str  # "bwrap" or "none"
    hide: tuple[Path, ...] = ()
    why: str = ""  # why there is no bwrap sandbox, for the host's printout
    bwrap: str = ""

    @classmethod
    def probe(cls, hide: list[Path]) -> "Sandbox":
        hidden = tuple(Path(path) for path in hide)
        bwrap = shutil.which("bwrap")
        if not bwrap:
            return cls.none("bubblewrap (bwrap) is not installed", hide=hidden)
        try:
            done = subprocess.run([bwrap, *PROBE_ARGS], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as error:
            return cls.none(f"bwrap could not run: {error}", hide=hidden)
        if done.returncode != 0:
            said = done.stderr.strip()[-300:] or f"exit status {done.returncode}"
            return cls.none(f"bwrap does not work on this host: {said}", hide=hidden)
        return cls(kind="bwrap", hide=hidden, bwrap=bwrap)

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
    ) -> list[str]:
        """The command line that runs `argv` inside the sandbox.

        `home_binds` are shown read-write (Claude Code's login and transcripts); `reveal`
        read-only (a binary or package prefix that lives under a hidden place).
        """
        if self.kind != "bwrap":
            return list(argv)
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += _hide_and_reveal([*host_private(), *self.hide], [*ALWAYS_SHOWN, *reveal])
        for path in (directory, temp_directory):
            args += ["--bind", str(Path(path).resolve()), os.path.abspath(path)]
        args += ["--ro-bind", str(Path(secrets_directory).resolve()), os.path.abspath(secrets_directory)]
        for path in home_binds:
            if Path(path).exists():
                args += ["--bind", str(Path(path).resolve()), os.path.abspath(path)]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--die-with-parent", "--new-session", "--chdir", os.path.abspath(directory), "--", *argv]
        return args


def host_private() -> list[Path]:
    """Hidden whatever the daemon says: shared scratch places (the agent gets empty private
    ones), the host user's home (keys, cloud logins; Claude Code's login is bound back in)
    and the gateway's settings file, which may sit in the code's directory."""
    places = [Path("/tmp"), Path("/var/tmp"), REPO / ".env"]
    home = Path.home().resolve()
    if len(home.parts) > 1:  # a service user whose home is / keeps it
        places.append(home)
    return places


def _hide_and_reveal(hide: list[Path], reveal: list[Path]) -> list[str]:
    """Mounts, outer places first, so a place revealed inside a hidden one shows, and one
    hidden inside a revealed one (the gateway's var/ in the code's directory) stays hidden."""
    mounts = []
    for path in hide:
        real = Path(path).resolve()
        if real.is_dir():
            mounts.append((len(real.parts), 0, ["--tmpfs", str(real)]))
        elif real.exists():
            mounts.append((len(real.parts), 0, ["--ro-bind", "/dev/null", str(real)]))
    for path in reveal:
        if Path(path).exists():  # at its own name: PATH may name it through a link (current -> v7)
            name = os.path.abspath(path)
            mounts.append((len(Path(name).parts), 1, ["--ro-bind", str(Path(path).resolve()), name]))
    return [arg for *_, args in sorted(mounts, key=lambda m: m[:2]) for arg in args]


def limit_resources() -> None:
    """Runs in the agent's process between fork and exec. Hard limits too, so the agent
    cannot raise them again."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = OPEN_FILES if hard == resource.RLIM_INFINITY else min(OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))


def private_directory(path: Path) -> Path:
    """Make `path` (and missing parents) a real directory, mode 0700, not a link."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        if path.is_symlink() or not path.is_dir():
            raise RuntimeError(f"{path} is not a directory of its own") from None
    os.chmod(path, 0o700)
    return path


def write_private(directory: Path, name: str, data: str | bytes, mode: int = 0o600) -> Path:
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
        view = memoryview(data.encode() if isinstance(data, str) else data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(partial, target)
    return target
