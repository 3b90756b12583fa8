"""A session's environment: where secret values go, and the only place they go in the clear.

The runner starts the agent's commands with `session_environment(session_id=...)` merged
into their environment. A secret stored `as_file` is written to a file of its own, mode
0600, in a session-private directory (mode 0700) outside the agent's working tree and
outside every directory send_file reads from; `$NAME` then holds the file's path.
"""

import os
from pathlib import Path

from django.conf import settings

from secrets_vault.services import session_secrets


def secret_files_directory(session_id: int) -> Path:
    return Path(settings.CALVIN_SECRET_FILES_DIR) / str(int(session_id))


def _private_directory(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        if path.is_symlink() or not path.is_dir():
            raise RuntimeError(f"{path} is not a directory of its own") from None
    os.chmod(path, 0o700)


def _write_private(directory: Path, name: str, value: str) -> Path:
    """Write atomically (a reader never sees half a key) and never through a link."""
    target = directory / name
    partial = directory / f".{name}.partial"
    try:
        os.unlink(partial)  # left by a crash, or planted: never written through
    except FileNotFoundError:
        pass
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        data = value.encode()
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
    os.replace(partial, target)
    return target


def session_environment(*, session_id: int) -> dict[str, str]:
    """NAME -> value (or, for a file secret, NAME -> the file's path) for every secret in
    the session's scope, the nearest place winning (session, then agent, then workspace).

    Fails closed (a secret that does not decrypt raises, naming it). Files of secrets no
    longer in scope are removed, so a deleted secret does not linger on disk.
    """
    from sessions.models import Session

    session = Session.objects.values("workspace_id", "agent_id").get(id=session_id)
    rows = session_secrets(session_id=session_id, workspace_id=session["workspace_id"], agent_id=session["agent_id"])
    directory = secret_files_directory(session_id)
    environment, files = {}, set()
    for secret, value in rows:
        if secret.as_file:
            _private_directory(directory)
            environment[secret.name] = str(_write_private(directory, secret.name, value))
            files.add(secret.name)
        else:
            environment[secret.name] = value
    if directory.is_dir():
        for stale in directory.iterdir():
            if stale.name not in files:
                stale.unlink()
    return environment
