"""preview and unpreview against the hostile corpus (tests/hostile.py), with a host answering the
probe: every value in every argument gets a specific answer, never the SDK's bare
"Error executing tool", a NUL or a non-finite number is never accepted, and what is accepted
is a live preview of this session with a DNS-label name."""

import json

import pytest

from calvin.previews.addresses import LABEL_RE
from calvin.previews.models import Preview
from tests.hostile import CORPUS, VALID_CALLS, with_value_at
from tests.previews.support import LayerHost

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def seated_agent(agent, settings):
    settings.CALVIN_REFUSALS_PER_MINUTE = 1_000_000  # refused on purpose, often
    host = LayerHost(name="hostile-preview-host", workspace=agent.session.workspace)
    host.seat(agent.session)
    yield agent
    host.stop()


@pytest.mark.parametrize("tool", ["preview", "unpreview"])
def test_the_corpus_in_every_argument(seated_agent, tool):
    valid = VALID_CALLS["calvin"][tool]
    if tool == "unpreview":  # something to take down, again before each value
        assert not seated_agent.call("preview", {"port": 8080, "name": valid["name"]}).is_error
    answer = seated_agent.raw_call(tool, json.dumps(valid))
    assert not answer["isError"], answer
    accepted = 0
    for slot in valid:
        for value in CORPUS:
            if tool == "unpreview":
                seated_agent.call("preview", {"port": 8080, "name": valid["name"]})
            result = seated_agent.raw_call(tool, with_value_at(valid, (slot,), value))
            text = result["content"][0]["text"] if result.get("content") else ""
            if result["isError"]:
                detail = text.removeprefix(f"Error executing tool {tool}").lstrip(": ")
                assert len(detail) > 5, f"{tool} {slot}={value[:40]}: generic answer {text!r}"
                continue
            assert "\\u0000" not in value and value not in ("NaN", "Infinity", "-Infinity", "1e999", "-1e999")
            accepted += 1
    # Of the corpus, no value names this session's preview for unpreview; some are a name or a port.
    assert accepted > 0 if tool == "preview" else accepted == 0
    for preview in Preview.objects.all():
        assert LABEL_RE.fullmatch(preview.name) and 1 <= preview.port <= 65535
        assert preview.session_id == seated_agent.session.id
