"""Helpers for the host-side tests: real runners, real subprocesses, in temporary roots."""

import asyncio
from pathlib import Path

from sessions.host.runner import SessionRunner
from sessions.host.sandbox import Sandbox

RECORDED = Path(__file__).parent / "recorded"


class Roots:
    """A host's sessions, temp and secrets roots under one test directory."""

    def __init__(self, base: Path):
        self.sessions, self.temp, self.secrets = base / "sessions", base / "session-tmp", base / "secret-files"
        self.homes = base / "homes"  # the runner's default: beside the secrets root

    def hidden(self) -> list[Path]:
        return [self.sessions, self.temp, self.secrets, self.homes]

    def bwrap(self) -> Sandbox:
        sandbox = Sandbox.probe(self.hidden())
        assert sandbox.kind == "bwrap", f"bubblewrap must work here (scripts/test installs it): {sandbox.why}"
        return sandbox

    def none(self) -> Sandbox:
        return Sandbox.none("plain process isolation, as on a host where bwrap fails")

    def sandbox(self, kind: str) -> Sandbox:
        return self.bwrap() if kind == "bwrap" else self.none()

    def runner(self, session_id: int, sandbox: Sandbox, **options) -> tuple[SessionRunner, list[dict]]:
        """A runner whose emitted messages collect in the returned list."""
        emitted = []

        async def emit(message: dict) -> None:
            emitted.append(message)

        runner = SessionRunner(
            session_id=session_id,
            sessions_root=self.sessions,
            temp_root=self.temp,
            secrets_root=self.secrets,
            sandbox=sandbox,
            emit=emit,
            **options,
        )
        return runner, emitted


def a_turn(provider: dict, *, number: int = 1, session: int = 1, prompt: str = "hello", **fields) -> dict:
    turn = {
        "type": "turn",
        "turn": number,
        "turns": [number],
        "session": session,
        "prompt": prompt,
        "runner": {"generation": 1, "token": "cvn_test-token"},
        "mcp_servers": {"calvin": "http://127.0.0.1:9/mcp"},
        "provider": provider,
        "instructions": "",
        "secrets": [],
    }
    return {**turn, **fields}


def command(*argv: str) -> dict:
    return {"kind": "command", "command": list(argv)}


def shell(script: str) -> dict:
    return command("sh", "-c", script)


def run_turn(runner: SessionRunner, turn: dict, **options) -> dict:
    return asyncio.run(runner.run_turn(turn, **options))


def events_of(emitted: list[dict]) -> list[dict]:
    return [message["event"] for message in emitted if message["type"] == "turn.event"]
