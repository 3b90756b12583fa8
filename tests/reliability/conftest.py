"""Fixtures of the fault tests: their own PostgreSQL and Redis per module, Calvin's processes per test.

These tests never use pytest-django's test database: `_real_services` (tests/conftest.py) is
replaced here by a check of the two binaries, so a run of this directory alone makes none.
"""

import fcntl
import os
import re
import shutil
from pathlib import Path

import pytest
from django.conf import settings

from tests.reliability.cluster import PG_BIN, Postgres, Redis
from tests.reliability.processes import Stack

TEMPLATE = "calvin_template"


@pytest.fixture(scope="session", autouse=True)
def _real_services():
    assert (PG_BIN / "initdb").exists(), f"PostgreSQL 15 binaries expected in {PG_BIN}"


def _module_directory(request) -> Path:
    name = re.sub(r"[^a-z0-9_]+", "-", request.module.__name__.rsplit(".", 1)[-1].lower())
    return Path(settings.VAR_DIR) / "reliability" / name


@pytest.fixture(scope="module")
def cluster(request):
    """(postgres, redis) of this module alone, both running; Calvin's schema migrated once."""
    directory = _module_directory(request)
    postgres = Postgres(directory / "postgres")
    postgres.start()
    redis = Redis(log=directory / "redis.log")
    redis.start()
    try:
        Stack(
            name="migrate", directory=directory / "migrate", postgres=postgres, redis=redis, database=TEMPLATE
        ).migrate()
        yield postgres, redis
    finally:
        redis.stop()
        postgres.stop()


_count = [0]


@pytest.fixture
def one_experiment_at_a_time():
    """An exclusive lock shared by pytest-xdist's workers (var/<TEST_NAME>/reliability.lock): two
    fault experiments at once on this 2-CPU machine starved each other's workers (4 effects a
    second) far past the recovery bound. The rest of the suite still runs beside one."""
    var = Path(settings.VAR_DIR)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        var = var.parent  # tests/parallel_env.py: var/<TEST_NAME>/<worker>
    var.mkdir(parents=True, exist_ok=True)
    with open(var / "reliability.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def stack(request, cluster, one_experiment_at_a_time):
    """A Stack on the module's cluster: a fresh `calvin` database cloned from the migrated
    template, a queue and channel prefix of its own; its processes are stopped after the test.
    One at a time across xdist workers (one_experiment_at_a_time)."""
    postgres, redis = cluster
    if not redis.answers():
        redis.start()  # a test that killed it and failed before starting it again
    if not postgres.answers():
        postgres.start()
    test_name = re.sub(r"[^a-z0-9_]+", "-", request.node.name.lower())[:40]
    shutil.rmtree(_module_directory(request) / test_name, ignore_errors=True)  # an earlier run's logs
    _count[0] += 1
    stack = Stack(
        name=f"rel-{test_name}",
        directory=_module_directory(request) / test_name,
        postgres=postgres,
        redis=redis,
        database=f"calvin_{_count[0]}",
        template=TEMPLATE,
    )
    yield stack
    stack.stop()
