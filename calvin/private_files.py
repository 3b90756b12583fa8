"""The gateway's files are its own: var/ 0700, what the gateway makes there 0600.

var/ holds the SQLite database, stored files, secret_key, vault_key, logs and demo.mcp.json
(a working runner token): nothing another user of the machine may read.
"""

import os
import stat
from pathlib import Path

# Set once when a gateway process starts (`up`, calvin.http_server, a celery worker): every
# file any library makes afterwards (SQLite and its journals, logs, stored files, keys) gets
# no group or other bits, where a mode passed at each place would miss one. Not for the host
# daemon: its git mirrors and builds are read by an agent of another uid.
GATEWAY_UMASK = 0o077
PRIVATE_DIRECTORY = 0o700
PRIVATE_FILE = 0o600


def gateway_umask_set() -> int:
    """Make what this process creates private to its user; returns the umask before."""
    return os.umask(GATEWAY_UMASK)


def private_modes_ensure(*, var_dir: Path, directories=()) -> None:
    """What an older run (or a looser umask) left: var/ and `directories` 0700, the files
    directly in var/ 0600. A symlink is left as it is, never followed."""
    for directory in (var_dir, *directories):
        directory = Path(directory)
        if directory.is_dir() and not directory.is_symlink():
            os.chmod(directory, PRIVATE_DIRECTORY)
    with os.scandir(var_dir) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False) and stat.S_IMODE(entry.stat().st_mode) & 0o077:
                os.chmod(entry.path, PRIVATE_FILE)
