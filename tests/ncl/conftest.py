"""ncl as a real subprocess: the way an agent in its sandbox and a person at a terminal run it."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.api.conftest import api_url, other_workspace, person, stranger  # noqa: F401  (fixtures)

NCL = Path(__file__).resolve().parents[2] / "bin" / "ncl"


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


def ncl(*args: str, url: str | None = None, token: str | None = None, env: dict | None = None) -> Ran:
    environment = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
    if url is not None:
        environment["CALVIN_URL"] = url
    if token is not None:
        environment["CALVIN_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, str(NCL), *args],
        env={**environment, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def as_person(gateway, person):  # noqa: F811
    """ncl with the workspace owner's API token, given the API's address as a person would."""
    return lambda *args: ncl(*args, url=person.base, token=person.token)


def as_agent(gateway, client):
    """ncl with an agent's runner token and the gateway's bare address, as its runner sets them."""
    return lambda *args: ncl(*args, url=gateway, token=client.token)
