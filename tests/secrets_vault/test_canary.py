"""The canary: a secret pushed through every text argument of every tool of both MCP servers,
plainly and encoded (and as a key, where a tool takes a mapping), is found afterwards only
as ciphertext.

Searched: every column of every table (text, JSON and binary), every stored file, every
log record made meanwhile, every tool answer, every frame the thread's live page got, and,
for a session in a Slack thread, every request the Slack stand-in received (headers,
bodies, uploaded bytes).
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

from calvin.chat.models import SlackPost
from calvin.chat.slack.outbox import WAITING
from calvin.workspaces.models import Member
from secrets_vault.scanner import SecretScanner, encoded_forms
from secrets_vault.services import secret_put, secret_set
from sessions.services import runner_start, session_start
from tests.chat.conftest import slack_team, standin  # noqa: F401 (fixtures)
from tests.conftest import Agent, wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie, ws_connect
from tests.hostile import VALID_CALLS, with_value_at
from tests.tools.test_hostile_inputs import _slots, _valid_calls
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

# Reserved characters make every encoding differ from the value itself.
CANARY = "cAn4ry/+Secret=Value?x&y 42"
WORKSPACE_CANARY = "W0rkspace-canary:tok3n/Zq"
# Shaped like an environment variable name, so that it is a key add_mcp_server's env takes.
KEY_CANARY = "Key_Canary_9f3ZxQ"


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


def keyed_calls(agent, key: str) -> list[tuple[Agent, str, dict]]:
    """(client, tool, arguments) with `key` as a key of a mapping the tool takes: a card's
    state, a card's element id, add_mcp_server's env."""
    state = json.loads(json.dumps(VALID_CALLS["calvin"]["post_card"]))
    state["spec"]["state"] = {key: "v"}
    element = json.loads(json.dumps(VALID_CALLS["calvin"]["post_card"]))
    elements = element["spec"]["elements"]
    elements[key] = elements.pop("t")
    elements["root"]["children"] = [key if child == "t" else child for child in elements["root"]["children"]]
    env = {**VALID_CALLS["nanoclaw"]["add_mcp_server"], "env": {key: "fast"}}
    return [(agent, "post_card", state), (agent, "post_card", element), (agent.nanoclaw, "add_mcp_server", env)]


def settled() -> bool:
    """Every tool call's effect applied (or failed) and every Slack post it made sent."""
    calls = ToolCall.objects.filter(status__in=[ToolCall.Status.PENDING, ToolCall.Status.APPLYING])
    return not calls.exists() and not SlackPost.objects.filter(status__in=WAITING).exists()


def slack_recorded(server) -> list[tuple[str, str]]:
    """(where, text) for everything the Slack stand-in received: each request as it arrived
    and as it parsed, each uploaded file's bytes, each view opened. Read once all is settled."""
    calls, uploads, views = list(server.calls), dict(server.uploads), list(server.views)
    found = [(f"slack {c.method}", f"{c.headers} {c.body.decode('utf-8', 'replace')}") for c in calls]
    found += [(f"slack {c.method} (parsed)", json.dumps(c.params, ensure_ascii=False)) for c in calls]
    found += [
        (f"slack upload {file_id}", bytes(u.get("bytes") or b"").decode("utf-8", "replace"))
        for file_id, u in uploads.items()
    ]
    found += [("slack view", json.dumps(view, ensure_ascii=False)) for view in views]
    return found


@pytest.fixture
def slack_agent(gateway, workspace, slack_team, celery_worker):  # noqa: F811 (the fixture imported above)
    """A session in a Slack thread of the stand-in's channel C0001."""
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(
        workspace=workspace,
        owner=owner,
        title="slack canary",
        channel_kind="slack",
        channel_id="C0001",
        thread_ts="1700000000.000001",
    )
    runner, token = runner_start(session=session)
    yield Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    wait_for(settled, timeout=60)


@pytest.fixture(params=["web", "slack"])
def canary_agent(request):
    return request.getfixturevalue("agent" if request.param == "web" else "slack_agent")


def test_a_secret_is_found_only_as_ciphertext(canary_agent, vault, request, settings, caplog, gateway, monkeypatch):
    # `vault`: the key the Slack installation's bot token was stored under, for the Slack session.
    agent = canary_agent
    settings.CALVIN_REFUSALS_PER_MINUTE = 1_000_000  # refused on purpose, hundreds of times
    settings.CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = 0.2  # an accepted approval_prompt waits this long, undecided
    monkeypatch.setattr("approvals.services.MAX_PENDING_PER_SESSION", 1_000_000)
    caplog.set_level(logging.DEBUG)
    session = agent.session
    secret_set(session=session, name="CANARY", value=CANARY)
    secret_set(session=session, name="KEY_CANARY", value=KEY_CANARY)
    secret_put(workspace_id=session.workspace_id, name="ORG_CANARY", value=WORKSPACE_CANARY)
    (agent.directory / "ok.txt").write_text("a harmless file")
    live = LiveFrames(gateway, session.thread_id)
    # A harmless file first, so that for Slack there are uploaded bytes to search as well.
    assert not agent.raw_call("send_file", json.dumps({"path": "ok.txt"}))["isError"]

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
    # The secrets as keys, where a tool takes a mapping.
    for value in (KEY_CANARY, CANARY):
        for disguise in disguises(value):
            for client, tool, arguments in keyed_calls(agent, disguise):
                answer = client.raw_call(tool, json.dumps(arguments))
                answers.append(json.dumps(answer))
                if not answer["isError"]:
                    accepted.append(("key", tool, disguise))
    # Files holding the secret, plainly or encoded, under both send_files.
    for i, disguise in enumerate(disguises(CANARY)):
        name = f"leak-{i}.txt"
        (agent.directory / name).write_text(f"config\nTOKEN={disguise}\n")
        for client, call in ((agent, {"path": name}), (agent.nanoclaw, {"path": name, "to": "thread"})):
            answer = client.raw_call("send_file", json.dumps(call))
            answers.append(json.dumps(answer))
            if not answer["isError"]:
                accepted.append(("file", name, disguise))
    # Everything accepted has reached its chat (for Slack, the stand-in) before the search.
    wait_for(settled, timeout=120)
    live.close()

    assert not accepted, f"calls holding the secret were accepted: {accepted[:5]}"
    named = [a for a in answers if any(f"the secret {n}" in a for n in ("CANARY", "ORG_CANARY", "KEY_CANARY"))]
    assert len(named) > len(answers) // 2, "most refusals name the secret they found"

    watch = SecretScanner([("CANARY", CANARY), ("ORG_CANARY", WORKSPACE_CANARY), ("KEY_CANARY", KEY_CANARY)])
    assert all(len(encoded_forms(v)) >= 8 for v in (CANARY, WORKSPACE_CANARY))  # encodings are searched too
    leaks = [f"answer: {a[:200]}" for a in answers if watch.find(a)]
    leaks += [f"{where}: {text[:200]}" for where, text in every_cell() if watch.find(text)]
    leaks += [f"file {path}" for path, data in stored_files() if watch.find(data.decode("utf-8", "replace"))]
    lines = [f"{r.getMessage()}\n{r.exc_text or ''}\n{r.stack_info or ''}" for r in caplog.records]
    leaks += [f"log: {line[:200]}" for line in lines if watch.find(line)]
    leaks += [f"live frame: {frame[:200]}" for frame in live.frames if watch.find(frame)]
    slack = request.node.callspec.params["canary_agent"] == "slack"
    outbound = slack_recorded(request.getfixturevalue("standin")) if slack else []
    leaks += [f"{where}: {text[:200]}" for where, text in outbound if watch.find(text)]
    assert not leaks, "\n".join(leaks[:20])
    if slack:  # the accepted calls reached Slack: the search had something to search
        assert {"chat.postMessage", "chat.update", "upload"} <= {where.split()[1] for where, _ in outbound}
    assert len(answers) > 500 and caplog.records and live.frames
    # The ciphertext is there, and is all there is.
    cells = every_cell()
    assert any(where.endswith(".ciphertext") for where, _ in cells)
