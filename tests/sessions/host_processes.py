"""Real host daemons for tests: `manage.py host` processes dialing the test gateway."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from calvin.workspaces.models import Agent
from sessions.hosts import host_create
from sessions.models import Host, Message, Session

ROOT = Path(__file__).resolve().parents[2]
# What a host machine does not have: the gateway's database, broker and vault key.
GATEWAY_ONLY = ("DATABASE_URL", "REDIS_URL", "SP_STORE_KEY", "TEST_DATABASE_URL", "TEST_REDIS_URL")


@dataclass
class HostProcess:
    host: Host
    process: subprocess.Popen
    directory: Path
    log: Path

    def session_directory(self, session_id: int) -> Path:
        return self.directory / "sessions" / f"session-{session_id}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def host_start(
    *, gateway: str, name: str, directory: Path, capacity: int = 4, workspace=None, environment=None
) -> HostProcess:
    host, token = host_create(name=name, workspace=workspace)
    return host_process_start(
        gateway=gateway, host=host, token=token, directory=directory, capacity=capacity, environment=environment
    )


def host_process_start(
    *, gateway: str, host: Host, token: str, directory: Path, capacity: int = 4, environment=None
) -> HostProcess:
    """`environment` adds to (or, with None values, removes from) the host's environment."""
    directory.mkdir(parents=True, exist_ok=True)
    extra = environment or {}
    environment = {k: v for k, v in os.environ.items() if k not in GATEWAY_ONLY}
    environment.update(CALVIN_HOST_TOKEN=token, PYTHONUNBUFFERED="1")
    environment = {k: v for k, v in {**environment, **extra}.items() if v is not None}
    log = directory / "host.log"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "host", "--gateway", gateway, "--name", host.name]
        + ["--capacity", str(capacity), "--dir", str(directory)],
        cwd=ROOT,
        env=environment,
        stdout=open(log, "ab"),  # noqa: SIM115 - the child holds it
        stderr=subprocess.STDOUT,
    )
    return HostProcess(host=host, process=process, directory=directory, log=log)


def wait_connected(*hosts: HostProcess, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    for handle in hosts:
        while not Host.objects.get(id=handle.host.id).channel_name:
            assert handle.process.poll() is None, handle.output()
            assert time.monotonic() < deadline, f"host {handle.host.name} did not connect:\n{handle.output()}"
            time.sleep(0.05)


def scripted(agent: Agent, steps: list) -> Agent:
    agent.provider = Agent.Provider.SCRIPT
    agent.provider_script = json.dumps(steps)
    agent.save(update_fields=["provider", "provider_script"])
    return agent


def commanded(agent: Agent, argv: list[str]) -> Agent:
    agent.provider = Agent.Provider.COMMAND
    agent.provider_command = argv
    agent.save(update_fields=["provider", "provider_command"])
    return agent


def agent_texts(session: Session) -> list[str]:
    return list(
        Message.objects.filter(thread_id=session.thread_id, author=Message.Author.AGENT, kind=Message.Kind.TEXT)
        .order_by("id")
        .values_list("text", flat=True)
    )


def system_texts(session: Session) -> list[str]:
    return list(
        Message.objects.filter(thread_id=session.thread_id, author=Message.Author.SYSTEM)
        .order_by("id")
        .values_list("text", flat=True)
    )
