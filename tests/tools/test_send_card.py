"""send_card over real MCP with the real worker: the card in both renderings, every problem
refused at once, links and choices, and each person's choice delivered to the agent once."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from calvin.dashboard.actions import ActionRefused
from calvin.workspaces.models import Member
from secrets_vault.crypto import new_key
from secrets_vault.services import secret_set
from sessions.models import Message, Turn
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import MEMBER_PASSWORD, OWNER_PASSWORD, csrf_token_in, logged_in
from tests.tools.test_ask_user_question import tap
from tools.models import CardChoice, ToolCall
from tools.services import nanoclaw_cards

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {
    "title": "Release 7.1",
    "description": "All checks passed.",
    "children": [
        {"type": "text", "text": "Ready to roll out."},
        {"type": "field", "label": "Branch", "value": "release-7"},
        {"type": "field", "label": "Tests", "value": 412},
        {"type": "divider"},
    ],
    "actions": [
        {"label": "Open the logs", "url": "https://ci.example.com/runs/4711"},
        {"label": "Deploy", "value": "deploy-prod"},
        {"label": "Hold", "value": "Hold"},
    ],
}


def sent(agent, card: dict, **arguments) -> Message:
    result = agent.nanoclaw.call("send_card", {"card": card, **arguments})
    assert not result.is_error, text_of(result)
    assert result.structured_content["status"] == "pending"  # returned at once; the worker posts it
    call_id = result.structured_content["tool_call_id"]
    wait_for(lambda: ToolCall.objects.get(id=call_id).status == ToolCall.Status.APPLIED)
    return Message.objects.get(tool_call_id=call_id)


def refused(agent, card, *expected: str, **arguments) -> str:
    result = agent.nanoclaw.call("send_card", {"card": card, **arguments})
    text = text_of(result)
    assert result.is_error, text
    assert text.startswith("Error executing tool send_card: invalid card: ") or not expected, text
    for piece in expected:
        assert piece in text, f"{piece!r} not in {text!r}"
    assert not ToolCall.objects.filter(session=agent.session).exists(), "a refused card leaves no row"
    return text


def inbox(agent) -> list[str]:
    return list(
        Message.objects.filter(thread=agent.session.thread, kind=Message.Kind.SYSTEM).values_list("text", flat=True)
    )


def test_the_card_is_laid_out_for_the_web_and_block_kit(agent):
    message = sent(agent, CARD, fallbackText="Release 7.1 is ready")
    call = message.tool_call
    assert (call.server, call.tool) == ("nanoclaw", "send_card")
    assert message.kind == "card" and message.text == "Release 7.1 is ready"
    assert message.card == [
        {"kind": "header", "text": "Release 7.1"},
        {"kind": "text", "text": "All checks passed."},
        {"kind": "text", "text": "Ready to roll out."},
        {
            "kind": "fields",
            "items": [
                {"kind": "field", "label": "Branch", "value": "release-7"},
                {"kind": "field", "label": "Tests", "value": "412"},
            ],
        },
        {"kind": "divider"},
        {"kind": "buttons", "items": [{"label": "Open the logs", "url": "https://ci.example.com/runs/4711"}]},
        {
            "kind": "actions",
            "action": "choice",
            "target_id": call.id,
            "items": [{"label": "Deploy", "value": "1"}, {"label": "Hold", "value": "2"}],
        },
    ]
    types = [block["type"] for block in message.blocks]
    assert types == ["header", "section", "section", "section", "divider", "actions", "actions"]
    link, choices = message.blocks[5]["elements"], message.blocks[6]["elements"]
    assert link == [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": "Open the logs", "emoji": True},
            "url": "https://ci.example.com/runs/4711",
            "action_id": "link-0",
        }
    ]
    assert [(b["text"]["text"], b["action_id"]) for b in choices] == [
        ("Deploy", f"choice:{call.id}:0"),
        ("Hold", f"choice:{call.id}:1"),
    ]


def test_the_fallback_text_defaults_to_the_title_and_optional_parts_may_be_left_out(agent):
    message = sent(agent, {"title": "Heads up", "description": ""})
    assert message.text == "Heads up"
    assert message.card == [{"kind": "header", "text": "Heads up"}]
    assert [block["type"] for block in message.blocks] == ["header"]


def test_the_web_thread_renders_the_card(agent, gateway):
    message = sent(agent, CARD)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        page = http.get(f"/threads/{message.thread_id}/").text
    assert '<a class="button" href="https://ci.example.com/runs/4711"' in page
    assert f'action="/threads/{message.thread_id}/actions/choice/{message.tool_call_id}/"' in page
    assert '<button type="submit" name="value" value="1"' in page and ">Deploy</button>" in page


# ---------------------------------------------------------------- choices


def test_a_choice_reaches_the_agent_once_per_person(agent, gateway, plain_member):
    message = sent(agent, CARD)
    turns_before = Turn.objects.filter(session=agent.session).count()
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        first = tap(http, message.thread_id, message.tool_call_id, 1, action="choice")
        again = tap(http, message.thread_id, message.tool_call_id, 2, action="choice")
    assert first.status_code == 200 and first.json()["text"] == "Sent to the agent: you chose Deploy"
    assert again.status_code == 409 and again.json()["text"] == "you already chose Deploy"
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        assert tap(http, message.thread_id, message.tool_call_id, 2, action="choice").status_code == 200
    assert inbox(agent) == [
        'owner chose Deploy (value: deploy-prod) on the card "Release 7.1"',
        'member chose Hold on the card "Release 7.1"',
    ]
    # Each delivery is a queued turn for the agent, not just a line in the thread.
    assert Turn.objects.filter(session=agent.session).count() == turns_before + 2
    assert set(CardChoice.objects.values_list("member__user__username", "action_index")) == {
        ("owner", 1),
        ("member", 2),
    }


def test_concurrent_presses_by_one_person_deliver_once(agent, gateway):
    message = sent(agent, CARD)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        token = csrf_token_in(http.get(f"/threads/{message.thread_id}/").text)
        url = f"/threads/{message.thread_id}/actions/choice/{message.tool_call_id}/"
        barrier = threading.Barrier(8)

        def press(i):
            barrier.wait()
            return http.post(url, data={"value": str(1 + i % 2)}, headers={"X-CSRFToken": token})

        with ThreadPoolExecutor(max_workers=8) as pool:
            responses = list(pool.map(press, range(8)))
    assert sorted(r.status_code for r in responses) == [200] + [409] * 7
    assert len(inbox(agent)) == 1 and CardChoice.objects.count() == 1


def test_presses_that_are_not_choices_of_this_card_are_refused(agent, gateway, make_agent):
    message = sent(agent, CARD)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        for value in ("0", "3", "-1", "Deploy", ""):  # 0 is the link, 3 past the end
            response = tap(http, message.thread_id, message.tool_call_id, value, action="choice")
            assert response.status_code == 409 and response.json()["text"] == "that is not one of the card's choices"
        # Another session's thread in the same workspace: the card is not there.
        other = make_agent()
        response = tap(http, other.session.thread_id, message.tool_call_id, 1, action="choice")
        assert response.status_code == 409 and response.json()["text"] == "there is no such card in this thread"
    assert inbox(agent) == [] and not CardChoice.objects.exists()


def test_a_press_from_another_workspace_is_refused(agent, django_user_model):
    from calvin.workspaces.services import workspace_create

    user = django_user_model.objects.create_user("stranger", password="pw-stranger-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    stranger = Member.objects.get(workspace=globex, user=user)
    message = sent(agent, CARD)
    with pytest.raises(ActionRefused, match="only members of this thread's workspace"):
        nanoclaw_cards.card_choice_pressed(
            thread=message.thread, member=stranger, target_id=message.tool_call_id, value="1", via="slack"
        )
    assert inbox(agent) == [] and not CardChoice.objects.exists()


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("card", "expected"),
    [
        pytest.param({"description": "x"}, ["card: title: required"], id="no-title"),
        pytest.param({"title": "T"}, ["card: description: required"], id="no-description"),
        pytest.param({"title": "", "description": ""}, ["card: title: must not be empty"], id="empty-title"),
        pytest.param(
            {"title": "t" * 151, "description": "d" * 3001},
            ["card: title: at most 150 characters", "card: description: at most 3000 characters"],
            id="too-long",
        ),
        pytest.param({"title": "T", "description": "", "footer": "x"}, ["card: footer: unknown property"], id="extra"),
        pytest.param(
            {"title": "T", "description": "", "children": [{"type": "image", "url": "x"}]},
            ["card: children[0].type: Input should be 'text', 'field' or 'divider'", "card: children[0].url: unknown"],
            id="unknown-child-type",
        ),
        pytest.param(
            {"title": "T", "description": "", "children": [{"type": "field", "label": "L"}, {"type": "text"}]},
            [
                "card: children[0]: a field child has label and value (got label)",
                "card: children[1]: a text child has text (got none)",
            ],
            id="child-missing-props",
        ),
        pytest.param(
            {"title": "T", "description": "", "children": [{"type": "divider", "text": "x"}]},
            ["card: children[0]: a divider child has no other property (got text)"],
            id="divider-with-text",
        ),
        pytest.param(
            {"title": "T", "description": "", "children": [{"type": "text", "text": "x"}] * 41},
            ["card: children: at most 40 items (got 41)"],
            id="41-children",
        ),
        pytest.param(
            {"title": "T", "description": "", "children": [{"type": "field", "label": "l", "value": "v"}] * 11},
            ["card: at most 10 field children (got 11)"],
            id="11-fields",
        ),
        pytest.param(
            {"title": "T", "description": "", "actions": [{"label": f"a{i}", "value": "v"} for i in range(26)]},
            ["card: actions: at most 25 items (got 26)"],
            id="26-actions",
        ),
        pytest.param(
            {
                "title": "T",
                "description": "",
                "actions": [
                    {"label": "Both", "url": "https://example.com", "value": "v"},
                    {"label": "Neither"},
                    {"label": "Script", "url": "javascript:alert(1)"},
                    {"label": "x" * 76, "value": "v"},
                    {"label": "Big", "value": "v" * 2001},
                ],
            },
            [
                "card: actions[0]: an action has either a url (a link) or a value (a choice)",
                "card: actions[1]: an action has either a url (a link) or a value (a choice)",
                "card: actions[2].url: URL scheme should be 'http' or 'https'",
                "card: actions[3].label: at most 75 characters",
                "card: actions[4].value: at most 2000 characters",
            ],
            id="bad-actions",
        ),
        pytest.param(
            {"title": "T", "description": "", "children": [{"type": "field", "label": "n", "value": True}]},
            ["card: children[0].value: must be a string or a number"],
            id="field-value-type",
        ),
    ],
)
def test_bad_cards_are_refused(agent, card, expected):
    refused(agent, card, *expected)


def test_a_non_finite_field_value_is_refused(agent):
    arguments = (
        '{"card": {"title": "T", "description": "", "children": [{"type": "field", "label": "n", "value": NaN}]}}'
    )
    result = agent.nanoclaw.raw_call("send_card", arguments)
    assert result["isError"]
    assert "card: children[0].value: must be a finite number (not NaN or Infinity)" in result["content"][0]["text"]


def test_every_problem_is_listed_in_one_refusal(agent):
    card = {
        "title": "t" * 151,
        "description": 7,
        "children": [{"type": "field", "label": "L"}],
        "actions": [{"label": "go", "url": "ftp://example.com"}],
        "colour": "red",
    }
    refused(
        agent,
        card,
        "card: title: at most 150 characters",
        "card: description: must be a string",
        "card: children[0]: a field child has label and value",
        "card: actions[0].url: URL scheme should be 'http' or 'https'",
        "card: colour: unknown property",
        "fallbackText: at most 3000 characters",
        fallbackText="f" * 3001,
    )


def test_too_many_slack_blocks_are_refused(agent):
    # Alternating links and choices: each run is its own actions block.
    actions = [{"label": f"a{i}", **({"url": "https://x.example"} if i % 2 else {"value": "v"})} for i in range(25)]
    children = [{"type": "text", "text": f"t{i}"} for i in range(30)]
    refused(
        agent,
        {"title": "T", "description": "d", "children": children, "actions": actions},
        "card: at most 50 Slack blocks (this card needs 57)",
    )


def test_a_card_containing_a_secret_is_refused(agent, settings):
    settings.SP_STORE_KEY = [new_key()]
    secret_set(session=agent.session, name="DEPLOY_TOKEN", value="tok-5ecret-99")
    for card, extra in (
        ({"title": "tok-5ecret-99", "description": ""}, {}),
        (
            {"title": "T", "description": "", "children": [{"type": "field", "label": "k", "value": "tok-5ecret-99"}]},
            {},
        ),
        ({"title": "T", "description": "", "actions": [{"label": "go", "value": "tok-5ecret-99"}]}, {}),
        ({"title": "T", "description": ""}, {"fallbackText": "x tok-5ecret-99"}),
    ):
        text = refused(agent, card, **extra)
        assert "the card contains the value of the secret" in text, text
        assert "tok-5ecret-99" not in text
