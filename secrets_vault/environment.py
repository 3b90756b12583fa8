"""A session's environment: where secret values go, and the only place they go in the clear.

The runner starts the agent's commands with `session_environment(session_id=...)` merged
into their environment. A secret stored `as_file` is written to a file of its own, mode
0600, in a session-private directory (mode 0700) outside the agent's working tree and
outside every directory send_file reads from; `$NAME` then holds the file's path.
"""

from pathlib import Path

from django.conf import settings

from secrets_vault.services import session_secrets

# The same private-file writes a host's runner makes for its sessions (pure os, no Django).
from sessions.host.sandbox import private_directory, write_private


def secret_files_directory(session_id: int) -> Path:
    return Path(settings.CALVIN_SECRET_FILES_DIR) / str(int(session_id))


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
            private_directory(directory)
            environment[secret.name] = str(write_private(directory, secret.name, value))
            files.add(secret.name)
        else:
            environment[secret.name] = value
    if directory.is_dir():
        for stale in directory.iterdir():
            if stale.name not in files:
                stale.unlink()
    return environment
