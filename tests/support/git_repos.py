"""Real git repositories for the tests: a bare upstream on disk and a way to push to it."""

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
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
