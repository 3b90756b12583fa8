"""The thread page's live feed: a real websocket client against uvicorn, real MCP, a real worker."""

import json

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from sessions.models import Message
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import CARD, OWNER_PASSWORD, STRANGER_PASSWORD, login_cookie, thread_seq, ws_connect
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def next_event(ws, timeout: float = 15.0) -> dict:
    return json.loads(ws.recv(timeout=timeout))


def assert_refused_with_4403(ws):
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403


def test_a_member_receives_the_agents_card_live(gateway, agent):
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        result = agent.call("post_card", {"spec": CARD})
        assert not result.is_error, text_of(result)
        event = next_event(ws)

    message = Message.objects.get(tool_call__session=agent.session)
    assert event["id"] == message.id
    assert event["kind"] == "card"
    html = event["html"]
    assert f'id="message-{message.id}"' in html
    assert "<h3>Nightly build report</h3>" in html
    assert "All green except one flaky test." in html
    assert "<th>Suite</th>" in html and "<td>web</td>" in html and "<td>198</td>" in html
    assert "<strong>Branch</strong><br>release-7" in html
    # Both charts as inline SVG with axes: bars for the bar chart, a line through points for the line chart.
    assert "<strong>Minutes per suite</strong>" in html and "<title>minutes · api · 9</title></rect>" in html
    assert "<strong>Build minutes this week</strong>" in html and "<title>total · Mon · 15</title></circle>" in html
    assert html.count('<g class="axes"') == 2
    assert 'href="https://ci.example.com/runs/4711"' in html and ">Open the logs</a>" in html


def test_an_idle_websocket_stays_open_and_still_gets_events(gateway, agent):
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        with pytest.raises(TimeoutError):  # nothing to say for longer than one of the layer's 5 s polls
            ws.recv(timeout=6)
        result = agent.call("post_card", {"spec": CARD})
        assert not result.is_error, text_of(result)
        assert next_event(ws)["kind"] == "card"


def test_a_person_from_another_workspace_is_refused_and_gets_no_events(gateway, agent, foreign_session):
    sessionid = login_cookie(gateway, "stranger", STRANGER_PASSWORD)
    # The same login may watch a thread of its own workspace: the refusal below is about membership.
    with ws_connect(gateway, foreign_session.thread_id, sessionid=sessionid) as own:
        with pytest.raises(TimeoutError):
            own.recv(timeout=0.3)

    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        result = agent.call("post_card", {"spec": CARD})
        assert not result.is_error, text_of(result)
        wait_for(lambda: ToolCall.objects.get(session=agent.session).status == ToolCall.Status.APPLIED)
        # Frames arrive in order: an event pushed to this socket would come before the close.
        assert_refused_with_4403(ws)


def test_an_anonymous_websocket_is_refused(gateway, make_agent):
    agent = make_agent()
    with ws_connect(gateway, agent.session.thread_id) as ws:
        assert_refused_with_4403(ws)


def test_a_logged_out_session_cookie_is_refused(gateway, make_agent):
    agent = make_agent()
    with ws_connect(gateway, agent.session.thread_id, sessionid="not-a-session-key") as ws:
        assert_refused_with_4403(ws)


def test_a_websocket_from_another_origin_is_refused(gateway, make_agent):
    """Cross-site websocket hijacking: the member's cookie rides along, the Origin gives it away."""
    agent = make_agent()
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(gateway, agent.session.thread_id, sessionid=sessionid, origin="https://evil.example")
    assert refused.value.response.status_code == 403


def test_a_page_that_connects_late_catches_up_on_what_it_missed(gateway, agent):
    rendered_at = thread_seq(agent.session.thread_id)  # a page rendered now
    result = agent.call("post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    call_id = result.structured_content["tool_call_id"]
    message = wait_for(lambda: Message.objects.filter(tool_call_id=call_id).first())
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": rendered_at}))
        event = json.loads(ws.recv(timeout=10))
        assert event["id"] == message.id and "Nightly build report" in event["html"]
        assert event["seq"] == rendered_at + 1
        ws.send(json.dumps({"since": event["seq"]}))  # nothing newer: nothing sent
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1)
