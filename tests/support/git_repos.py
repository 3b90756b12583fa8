"""Real git repositories for the tests: a bare upstream on disk and a way to push to it."""

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    # Checkouts belong to the agent's user (the tests run as root): git must still look into them.
    "GIT_CONFIG_GLOBAL": str(Path(__file__).with_name("agent-checkouts.gitconfig")),
}


def git(*args, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


class Upstream:
    """A bare repository (the "remote" a clone URL names) and a working copy that pushes to it."""

    def __init__(self, root: Path, name: str, files: dict[str, str], branch: str = "main"):
        self.bare = root / f"{name}.git"
        self.work = root / f"{name}-work"
        self.branch = branch
        git("init", "--bare", "--initial-branch", branch, str(self.bare))
        git("init", "--initial-branch", branch, str(self.work))
        git("remote", "add", "origin", str(self.bare), cwd=self.work)
        self.commit(files, "first")

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    def commit(self, files: dict[str, str], message: str) -> str:
        for path, text in files.items():
            target = self.work / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", message, cwd=self.work)
        git("push", "-q", "origin", self.branch, cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    @property
    def head(self) -> str:
        return git("rev-parse", self.branch, cwd=self.bare)


@contextlib.contextmanager
def git_server_that_never_answers():
    """A git:// server that accepts connections and never answers: a clone hangs on it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"git://127.0.0.1:{listener.getsockname()[1]}/stuck.git"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def local_clones_allowed(settings) -> None:
    """For a test whose repositories are upstreams on this disk (file:// URLs), with links to
    threads on a public origin, and the gateway's clone cache of an earlier test database gone
    (workspace ids start again with each one)."""
    from tools.services.git_work import GATEWAY_STATE

    settings.CALVIN_REPOSITORY_SCHEMES = ("https", "ssh", "git", "file")
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    shutil.rmtree(Path(settings.VAR_DIR) / GATEWAY_STATE, ignore_errors=True)
