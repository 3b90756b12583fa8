"""Keeps pytest-xdist's workers apart, as TEST_NAME keeps two runs apart.

Loaded early (`-p tests.parallel_env` in pytest's options), before pytest-django imports the
settings, so each worker's settings read a queue, a channel and cache prefix and a file tree of
its own; pytest-django gives each worker its own test database (`test_<name>_gw0`, ...).
"""

import os
import tempfile
from pathlib import Path

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")

if _worker:
    for _name in ("CALVIN_QUEUE", "CALVIN_CHANNEL_PREFIX"):
        os.environ[_name] = f"{os.environ.get(_name, 'calvin-test')}-{_worker}"
    if os.environ.get("CALVIN_VAR_DIR"):
        # The worker's tree has scripts/test's layout, one level down: var/<name>/<worker>/...
        old_var = Path(os.environ["CALVIN_VAR_DIR"])
        new_var = old_var / _worker
        os.environ["CALVIN_VAR_DIR"] = str(new_var)
        for _name in ("CALVIN_SESSIONS_DIR", "TMPDIR"):
            value = os.environ.get(_name)
            if value and Path(value).is_relative_to(old_var):
                os.environ[_name] = str(new_var / Path(value).relative_to(old_var))
        os.makedirs(os.environ.get("TMPDIR", new_var), exist_ok=True)
    tempfile.tempdir = None  # read TMPDIR again
