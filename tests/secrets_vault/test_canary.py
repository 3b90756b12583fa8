"""The canary: a secret pushed through every text argument of every tool of both MCP servers,
plainly and encoded, is found afterwards only as ciphertext.

Searched: every column of every table (text, JSON and binary), every stored file, every
log record made meanwhile, every tool answer, and every frame the thread's live page got.
"""

import base64
import json
import logging
import os
import threading
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from django.conf import settings as django_settings
from django.db import connection

from secrets_vault.crypto import new_key
from secrets_vault.scanner import SecretScanner, encoded_forms
from secrets_vault.services import secret_put, secret_set
from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie, ws_connect
from tests.hostile import with_value_at
from tests.tools.test_hostile_inputs import _slots, _valid_calls

pytestmark = pytest.mark.django_db(transaction=True)

# Reserved characters make every encoding differ from the value itself.
CANARY = "cAn4ry/+Secret=Value?x&y 42"
WORKSPACE_CANARY = "W0rkspace-canary:tok3n/Zq"


def disguises(value: str) -> list[str]:
    data = value.encode()
    return [
        value,
        base64.b64encode(data).decode(),
        base64.urlsafe_b64encode(data).decode(),
        base64.b64encode(b"xy" + data).decode(),  # another alignment
        data.hex(),
        data.hex().upper(),
        quote(value, safe=""),
        quote_plus(value),
    ]


class LiveFrames:
    """Every frame the thread's live page receives, collected on a thread of its own."""

    def __init__(self, base_url: str, thread_id: int):
        self.frames: list[str] = []
        self._socket = ws_connect(base_url, thread_id, sessionid=login_cookie(base_url, "owner", OWNER_PASSWORD))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        try:
            for frame in self._socket:
                self.frames.append(frame if isinstance(frame, str) else frame.decode("utf-8", "replace"))
        except Exception:
            pass

    def close(self):
        self._socket.close()
        self._reader.join(timeout=5)


def every_cell() -> list[tuple[str, str]]:
    """(table.column, text) for every non-null cell of every table, bytes decoded as UTF-8."""
    cells = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            names = [column.name for column in cursor.description]
            for row in cursor.fetchall():
                for name, value in zip(names, row, strict=True):
                    if value is None:
                        continue
                    if isinstance(value, memoryview | bytes):
                        text = bytes(value).decode("utf-8", "replace")
                    elif isinstance(value, dict | list):
                        text = json.dumps(value, ensure_ascii=False)
                    else:
                        text = str(value)
                    cells.append((f"{table}.{name}", text))
    return cells


def stored_files() -> list[tuple[str, bytes]]:
    found = []
    for root in (django_settings.MEDIA_ROOT,):
        for folder, _dirs, files in os.walk(root):
            found += [(os.path.join(folder, f), Path(folder, f).read_bytes()) for f in files]
    return found


def test_a_secret_is_found_only_as_ciphertext(agent, settings, caplog, gateway, monkeypatch):
    settings.SP_STORE_KEY = [new_key()]
    settings.CALVIN_REFUSALS_PER_MINUTE = 1_000_000  # refused on purpose, hundreds of times
    settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = 0.2  # an accepted approval_prompt waits this long, undecided
    monkeypatch.setattr("approvals.services.MAX_PENDING_PER_SESSION", 1_000_000)
    caplog.set_level(logging.DEBUG)
    session = agent.session
    secret_set(session=session, name="CANARY", value=CANARY)
    secret_put(workspace_id=session.workspace_id, name="ORG_CANARY", value=WORKSPACE_CANARY)
    (agent.directory / "ok.txt").write_text("a harmless file")
    live = LiveFrames(gateway, session.thread_id)

    answers, accepted = [], []
    for server in ("calvin", "nanoclaw"):
        client = agent if server == "calvin" else agent.nanoclaw
        for tool, arguments in _valid_calls(agent, server).items():
            for slot in _slots(tool, arguments):
                for value in (CANARY, WORKSPACE_CANARY):
                    for disguise in disguises(value):
                        text = json.dumps(f"see {disguise} here")
                        answer = client.raw_call(tool, with_value_at(arguments, slot, text))
                        answers.append(json.dumps(answer))
                        # approval_prompt's input is what Claude Code is about to run: a secret in it
                        # is hidden on the card and in the record, not refused (the scans below check).
                        hidden_not_refused = tool == "approval_prompt" and slot[0] == "input"
                        if not answer["isError"] and not hidden_not_refused:
                            accepted.append((server, tool, slot, disguise))
    # Files holding the secret, plainly or encoded, under both send_files.
    for i, disguise in enumerate(disguises(CANARY)):
        name = f"leak-{i}.txt"
        (agent.directory / name).write_text(f"config\nTOKEN={disguise}\n")
        for client, call in ((agent, {"path": name}), (agent.nanoclaw, {"path": name, "to": "thread"})):
            answer = client.raw_call("send_file", json.dumps(call))
            answers.append(json.dumps(answer))
            if not answer["isError"]:
                accepted.append(("file", name, disguise))
    live.close()

    assert not accepted, f"calls holding the secret were accepted: {accepted[:5]}"
    named = [a for a in answers if "the secret CANARY" in a or "the secret ORG_CANARY" in a]
    assert len(named) > len(answers) // 2, "most refusals name the secret they found"

    watch = SecretScanner([("CANARY", CANARY), ("ORG_CANARY", WORKSPACE_CANARY)])
    assert all(len(encoded_forms(v)) >= 8 for v in (CANARY, WORKSPACE_CANARY))  # encodings are searched too
    leaks = [f"answer: {a[:200]}" for a in answers if watch.find(a)]
    leaks += [f"{where}: {text[:200]}" for where, text in every_cell() if watch.find(text)]
    leaks += [f"file {path}" for path, data in stored_files() if watch.find(data.decode("utf-8", "replace"))]
    lines = [f"{r.getMessage()}\n{r.exc_text or ''}\n{r.stack_info or ''}" for r in caplog.records]
    leaks += [f"log: {line[:200]}" for line in lines if watch.find(line)]
    leaks += [f"live frame: {frame[:200]}" for frame in live.frames if watch.find(frame)]
    assert not leaks, "\n".join(leaks[:20])
    assert len(answers) > 500 and caplog.records and live.frames
    # The ciphertext is there, and is all there is.
    cells = every_cell()
    assert any(where.endswith(".ciphertext") for where, _ in cells)
