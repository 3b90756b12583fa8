"""preview and unpreview over real MCP HTTP: the seed's parameters, each refusal in words, the
rows and audit events, and the ports pushed to the session's host."""

import pytest

from calvin.audit.models import AuditEvent
from calvin.previews.models import Preview
from calvin.workspaces.services import workspace_create
from tests.conftest import text_of, wait_for
from tests.previews.support import LayerHost, preview_of
from tests.support.refusals import refusal
from tools.models import ToolCall
from tools.services.previews import LABEL_RULE, MAX_LIVE_PER_SESSION, NO_DOMAIN, NO_HOST, NO_SANDBOX

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def host(agent):
    layer_host = LayerHost(name=f"preview-host-{agent.session.id}", workspace=agent.session.workspace)
    layer_host.seat(agent.session)
    yield layer_host
    layer_host.stop()


@pytest.fixture
def other_workspace(django_user_model):
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    return workspace_create(name="Globex", slug="globex", owner_user=user)


def result_of(result) -> dict:
    assert not result.is_error, text_of(result)
    return result.structured_content


def test_preview_publishes_the_port_and_says_whether_it_listens(agent, host):
    got = result_of(agent.call("preview", {"port": 5173, "name": "my-app"}))
    assert got == {"url": "http://my-app.preview.localhost:8000/", "name": "my-app", "listening": True}
    assert host.requests[-1]["op"] == "preview.probe"
    assert (host.requests[-1]["session"], host.requests[-1]["port"]) == (agent.session.id, 5173)
    assert host.requests[-1]["ports"] == [5173]  # the host keeps the sandbox for it from the probe on
    preview = Preview.objects.get(name="my-app")
    assert (preview.session_id, preview.port, preview.access, preview.is_live()) == (
        agent.session.id,
        5173,
        "anyone",
        True,
    )
    assert AuditEvent.objects.filter(verb="preview.create", target_id=str(preview.id), via="mcp").count() == 1
    assert ToolCall.objects.filter(tool="preview", status="applied").count() == 1
    wait_for(lambda: host.pushes(agent.session.id) == [[5173]])

    host.answer = {"ok": True, "listening": False, "why": "not_listening"}
    assert result_of(agent.call("preview", {"port": 5173, "name": "my-app"}))["listening"] is False
    assert Preview.objects.count() == 1  # the same name on the same port: nothing new


def test_name_omitted_is_the_ports_own_else_64_random_bits(agent, host):
    first = result_of(agent.call("preview", {"port": 3000}))["name"]
    assert len(first) == 16 and int(first, 16) >= 0  # secrets.token_hex(8)
    assert result_of(agent.call("preview", {"port": 3000}))["name"] == first
    other = result_of(agent.call("preview", {"port": 3001}))["name"]
    assert other != first and len(other) == 16


def test_a_new_name_for_the_same_port_adds_one_and_unpreview_takes_one_down(agent, host):
    result_of(agent.call("preview", {"port": 3000, "name": "first"}))
    result_of(agent.call("preview", {"port": 3000, "name": "second"}))
    result_of(agent.call("preview", {"port": 2000, "name": "third"}))
    assert host.requests[-1]["ports"] == [2000, 3000]
    result_of(agent.call("unpreview", {"name": "third"}))
    assert sorted(Preview.objects.live().values_list("name", flat=True)) == ["first", "second"]
    # Omitted, the port's newest name.
    assert result_of(agent.call("preview", {"port": 3000}))["name"] == "second"
    assert result_of(agent.call("unpreview", {"name": "first"})) == {"name": "first", "removed": True}
    assert list(Preview.objects.live().values_list("name", flat=True)) == ["second"]
    ended = Preview.objects.get(name="first")
    assert ended.removed_reason == "unpreview" and ended.removed_at is not None
    assert AuditEvent.objects.filter(verb="preview.remove", target_id=str(ended.id)).count() == 1
    wait_for(lambda: host.pushes(agent.session.id)[-1:] == [[3000]])
    result_of(agent.call("unpreview", {"name": "second"}))
    wait_for(lambda: host.pushes(agent.session.id)[-1:] == [[]])
    # Taken down, the name is free again, and this URL serves the port anew.
    result_of(agent.call("preview", {"port": 4000, "name": "first"}))
    assert Preview.objects.live().get(name="first").port == 4000


def test_a_name_of_this_session_moves_to_another_port(agent, host):
    result_of(agent.call("preview", {"port": 3000, "name": "app"}))
    result_of(agent.call("preview", {"port": 3001, "name": "app"}))
    assert list(Preview.objects.live().values_list("name", "port")) == [("app", 3001)]
    assert AuditEvent.objects.filter(verb="preview.change").get().changes == {"port": [3000, 3001]}


def test_a_name_live_in_another_session_is_refused(agent, host, make_agent):
    other = make_agent()
    preview_of(other.session, "taken")
    assert "taken by another session's preview" in refusal(agent.call("preview", {"port": 3000, "name": "taken"}))
    assert "another session's" in refusal(agent.call("unpreview", {"name": "taken"}))
    assert Preview.objects.live().get(name="taken").session_id == other.session.id
    assert not ToolCall.objects.filter(tool__in=["preview", "unpreview"]).exists()  # nothing refused is stored


def test_a_name_held_only_by_an_expired_preview_is_free(agent, host, make_agent):
    from datetime import timedelta

    from django.utils import timezone

    other = make_agent()
    old = preview_of(other.session, "reused", expires_at=timezone.now() - timedelta(seconds=1))
    result_of(agent.call("preview", {"port": 3000, "name": "reused"}))
    old.refresh_from_db()
    assert old.removed_reason == "expired"
    assert Preview.objects.live().get(name="reused").session_id == agent.session.id


def test_the_per_session_cap(agent, host):
    for i in range(MAX_LIVE_PER_SESSION):
        preview_of(agent.session, f"p{i}", port=3000 + i)
    text = refusal(agent.call("preview", {"port": 5000, "name": "one-more"}))
    assert f"{MAX_LIVE_PER_SESSION} live previews" in text and "unpreview" in text
    assert "live previews" in refusal(agent.call("preview", {"port": 5000}))
    # Its existing names are still given.
    assert result_of(agent.call("preview", {"port": 3000}))["name"] == "p0"
    assert result_of(agent.call("preview", {"port": 3001, "name": "p1"}))["name"] == "p1"


@pytest.mark.parametrize("name", ["Upper", "-lead", "trail-", "two.labels", "under_score", "sp ace", "é"])
def test_a_name_that_is_not_one_dns_label_is_refused_with_the_rule(agent, host, name):
    assert refusal(agent.call("preview", {"port": 3000, "name": name})) == LABEL_RULE
    assert refusal(agent.call("unpreview", {"name": name})) == LABEL_RULE
    assert not host.requests  # refused before the host is asked


def test_unpreview_of_an_unknown_name(agent, host):
    assert "there is no live preview named ghost" in refusal(agent.call("unpreview", {"name": "ghost"}))


def test_a_session_without_a_host_is_refused(agent):
    assert refusal(agent.call("preview", {"port": 3000})) == NO_HOST


def test_a_host_not_connected_is_refused(agent, host):
    from sessions.models import Host

    Host.objects.filter(id=host.host.id).update(channel_name="", last_heartbeat_at=None)
    assert "the session's host is not connected" in refusal(agent.call("preview", {"port": 3000}))
    assert not Preview.objects.exists()


def test_a_host_without_a_sandbox_is_refused(agent, host):
    from sessions.models import Host

    Host.objects.filter(id=host.host.id).update(sandbox="none")
    assert refusal(agent.call("preview", {"port": 3000})) == NO_SANDBOX
    Host.objects.filter(id=host.host.id).update(sandbox="bwrap")
    host.answer = {"ok": True, "listening": False, "why": "no_sandbox"}  # the host's own word
    assert refusal(agent.call("preview", {"port": 3000})) == NO_SANDBOX
    assert not Preview.objects.exists()


def test_a_host_that_does_not_know_the_request_is_refused(agent, host):
    host.answer = {"ok": False, "error": "unknown request"}
    assert "older than previews" in refusal(agent.call("preview", {"port": 3000}))


def test_a_gateway_without_a_preview_domain_is_refused(agent, host, settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    settings.CALVIN_PREVIEW_DOMAIN = ""
    assert refusal(agent.call("preview", {"port": 3000})) == NO_DOMAIN
    settings.CALVIN_PREVIEW_DOMAIN = "previews.example.net"
    got = result_of(agent.call("preview", {"port": 3000, "name": "web"}))
    assert got["url"] == "https://web.previews.example.net/"


def test_previews_are_per_workspace_and_per_session(agent, host, make_agent, other_workspace):
    stranger = make_agent(other_workspace)
    preview_of(stranger.session, "globex-app")
    assert "another session's" in refusal(agent.call("unpreview", {"name": "globex-app"}))
    assert "taken by another session" in refusal(agent.call("preview", {"port": 1, "name": "globex-app"}))


def test_the_tools_say_what_they_do_and_take_the_seeds_parameters(agent):
    tools = {tool.name: tool for tool in agent.list_tools()}
    preview, unpreview = tools["preview"], tools["unpreview"]
    assert "adds a second name" in preview.description and "URLs already given out keep working" in preview.description
    port = preview.input_schema["properties"]["port"]
    assert (port["type"], port["minimum"], port["maximum"]) == ("integer", 1, 65535)
    assert preview.input_schema["required"] == ["port"]
    assert unpreview.input_schema["required"] == ["name"]
    assert "one name" in unpreview.description
