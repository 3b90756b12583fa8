"""request_secret over real MCP, as seed 000 says, and the private form that answers it."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import close_old_connections

from calvin.workspaces.models import Member
from calvin.workspaces.services import agent_create
from secrets_vault.models import SecretRequest
from secrets_vault.requests import SecretRequestRefused, secret_request_fulfil
from secrets_vault.services import secret_put, secret_set, session_secrets
from sessions.models import Message, Turn
from sessions.services import runner_start
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import MEMBER_PASSWORD, OWNER_PASSWORD, STRANGER_PASSWORD, csrf_token_in, logged_in
from tools.models import ToolCall
from tools.services.secret_requests import NO_VAULT

pytestmark = pytest.mark.django_db(transaction=True)

REASON = "To charge the test card in the billing tests"


def request(agent, name="STRIPE_API_KEY", reason=REASON, **extra):
    return agent.call("request_secret", {"name": name, "reason": reason, **extra})


def refused(agent, arguments: dict, expected: str) -> str:
    result = agent.call("request_secret", arguments)
    text = text_of(result)
    assert result.is_error, text
    assert expected in text, text
    assert not SecretRequest.objects.filter(session=agent.session).exists()
    return text


def card_posted(agent, name="STRIPE_API_KEY") -> Message:
    return wait_for(
        lambda: (
            Message.objects.filter(thread_id=agent.session.thread_id, tool_call__tool="request_secret")
            .filter(tool_call__secret_request__name=name)
            .first()
        )
    )


def test_it_posts_a_set_button_and_returns_at_once(agent, vault):
    result = request(agent)
    assert not result.is_error, text_of(result)
    assert "End your turn now" in result.structured_content["message"]
    secret_request = SecretRequest.objects.get(session=agent.session)
    assert (secret_request.name, secret_request.reason, secret_request.as_file) == ("STRIPE_API_KEY", REASON, False)
    assert secret_request.status == SecretRequest.Status.WAITING
    card = card_posted(agent).card
    buttons = [item for item in card if item["kind"] == "actions"]
    assert buttons == [
        {
            "kind": "actions",
            "action": "secret",
            "target_id": secret_request.pk,
            "items": [{"label": "Set STRIPE_API_KEY", "value": "set", "style": "primary"}],
        }
    ]
    assert any(REASON in item.get("text", "") for item in card)
    assert ToolCall.objects.get(id=result.structured_content["tool_call_id"]).arguments == {
        "name": "STRIPE_API_KEY",
        "reason": REASON,
        "file": False,
    }


def test_file_true_is_recorded_and_shown(agent, vault):
    result = request(agent, name="DEPLOY_KEY", file=True)
    assert not result.is_error, text_of(result)
    assert SecretRequest.objects.get(session=agent.session).as_file
    card = card_posted(agent, "DEPLOY_KEY").card
    assert any(
        "$DEPLOY_KEY holds its path" in f["value"] for item in card if item["kind"] == "fields" for f in item["items"]
    )


@pytest.mark.parametrize(
    "name",
    ["1ABC", "STRIPE-KEY", "KEY NAME", "KEY$", "", "Ä_KEY", "X" * 129, "KEY\n", "KEY=1"],
)
def test_a_name_that_is_not_an_environment_variable_name_is_refused(agent, vault, name):
    refused(agent, {"name": name, "reason": REASON}, "name: must be an environment variable name")


def test_a_name_of_128_characters_is_accepted(agent, vault):
    result = request(agent, name="_" + "A" * 127)
    assert not result.is_error, text_of(result)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("ab", "reason: 3 to 200 characters (got 2)"),
        ("x" * 201, "reason: 3 to 200 characters (got 201)"),
        ("line one\nline two", "reason: one line"),
        ("line one\u2028line two", "reason: one line"),
        ("carriage\rreturn", "reason: one line"),
        ("   ", "reason: must not be blank"),
    ],
)
def test_a_reason_must_be_one_line_of_3_to_200_characters(agent, vault, reason, expected):
    refused(agent, {"name": "TOKEN", "reason": reason}, expected)


def test_reasons_of_3_and_200_characters_are_accepted(agent, vault):
    assert not request(agent, name="A", reason="abc").is_error
    assert not request(agent, name="B", reason="y" * 200).is_error


def test_file_must_be_a_boolean(agent, vault):
    result = agent.call("request_secret", {"name": "TOKEN", "reason": REASON, "file": "yes"})
    assert result.is_error
    assert "file\n  Input should be a valid boolean" in text_of(result)
    assert not SecretRequest.objects.exists()


def test_ten_per_runner_and_a_restarted_runner_counts_again(agent, vault):
    for i in range(10):
        assert not request(agent, name=f"KEY_{i}").is_error
    text = text_of(request(agent, name="KEY_10"))
    assert "limit of 10 calls per runner reached; it resets when the runner restarts" in text
    _, token = runner_start(session=agent.session)
    restarted = type(agent)(session=agent.session, runner=None, token=token, url=agent.url)
    assert not request(restarted, name="KEY_10").is_error


@pytest.mark.parametrize("place", ["session", "workspace", "agent"])
def test_it_fails_when_a_secret_of_that_name_is_already_set(agent, vault, place):
    session = agent.session
    if place == "session":
        secret_set(session=session, name="STRIPE_API_KEY", value="already-there-1")
    elif place == "workspace":
        secret_put(workspace_id=session.workspace_id, name="STRIPE_API_KEY", value="already-there-1")
    else:
        secret_put(
            workspace_id=session.workspace_id, agent_id=session.agent_id, name="STRIPE_API_KEY", value="agent-value-1"
        )
    refused(agent, {"name": "STRIPE_API_KEY", "reason": REASON}, "a secret named STRIPE_API_KEY is already set")


def test_another_workspaces_or_sessions_secret_of_that_name_does_not_count(agent, vault, make_agent):
    other = make_agent()
    secret_set(session=other.session, name="STRIPE_API_KEY", value="in-another-session")
    other_agent = agent_create(workspace=agent.session.workspace, name="other-agent")
    secret_put(
        workspace_id=agent.session.workspace_id, agent_id=other_agent.id, name="STRIPE_API_KEY", value="agent-value-2"
    )
    assert not request(agent).is_error


def test_a_second_workspace_secret_of_that_name_does_not_count(agent, vault, django_user_model):
    from calvin.workspaces.services import workspace_create

    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    secret_put(workspace_id=globex.id, name="STRIPE_API_KEY", value="globex-wide")
    assert not request(agent).is_error


def test_a_second_request_while_one_waits_is_refused(agent, vault):
    assert not request(agent).is_error
    text = text_of(request(agent))
    assert "a request for STRIPE_API_KEY already waits in this thread" in text
    assert SecretRequest.objects.filter(session=agent.session).count() == 1


@pytest.mark.parametrize("mode", ["self-hosted", "hosted"])
def test_without_sp_store_key_it_fails(agent, settings, mode):
    settings.SP_STORE_KEY = []
    settings.CALVIN_MODE = mode
    refused(agent, {"name": "TOKEN", "reason": REASON}, NO_VAULT)


def test_the_reason_may_not_hold_a_secret(agent, vault):
    secret_set(session=agent.session, name="OLD_TOKEN", value="0ld-t0ken-value")
    refused(agent, {"name": "NEW_TOKEN", "reason": "rotate 0ld-t0ken-value"}, "the secret OLD_TOKEN")


# ------------------------------------------------------------------ the private form


def form_url(agent, secret_request) -> str:
    return f"/threads/{agent.session.thread_id}/secrets/{secret_request.pk}/"


def waiting(agent, **extra) -> SecretRequest:
    assert not request(agent, **extra).is_error
    card_posted(agent, extra.get("name", "STRIPE_API_KEY"))
    return SecretRequest.objects.get(session=agent.session)


def stored_value(agent, name="STRIPE_API_KEY"):
    session = agent.session
    found = dict(
        (row.name, value) for row, value in session_secrets(session_id=session.id, workspace_id=session.workspace_id)
    )
    return found.get(name)


def submit(http, url: str, value: str, **files):
    token = csrf_token_in(http.get(url).text)
    return http.post(url, data={"csrfmiddlewaretoken": token, "value": value}, files=files or None)


def test_the_owner_sets_it_and_the_agent_is_told_once(agent, vault, gateway):
    secret_request = waiting(agent)
    url = form_url(agent, secret_request)
    turns_before = Turn.objects.filter(session=agent.session).count()
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        page = http.get(url)
        assert page.status_code == 200
        assert 'type="password"' in page.text and 'autocomplete="off"' in page.text
        assert page.headers["cache-control"].startswith("max-age=0")
        response = submit(http, url, "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
        assert response.status_code == 302 and response.headers["location"] == url
        after = http.get(url)
        assert "STRIPE_API_KEY was set by owner" in after.text
        assert "sk_test_4eC39HqLyjWDarjtT1zdp7dc" not in after.text
        again = submit(http, url, "another-value-entirely")
        assert again.status_code == 409 and "already set" in again.text
    assert stored_value(agent) == "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
    notices = Message.objects.filter(thread_id=agent.session.thread_id, kind=Message.Kind.SYSTEM)
    told = [m.text for m in notices if "STRIPE_API_KEY was set by owner" in m.text]
    assert len(told) == 1 and "$STRIPE_API_KEY" in told[0]
    assert Turn.objects.filter(session=agent.session).count() == turns_before + 1
    card = wait_for(
        lambda: (m := card_posted(agent)) and any("was set by owner" in i.get("text", "") for i in m.card) and m
    )
    assert not [item for item in card.card if item["kind"] == "actions"], "the button is gone once set"
    assert "sk_test_4eC39HqLyjWDarjtT1zdp7dc" not in str(card.card)


def test_a_workspace_admin_may_set_it(agent, vault, gateway, plain_member):
    plain_member.role = Member.Role.ADMIN
    plain_member.save()
    secret_request = waiting(agent)
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        assert submit(http, form_url(agent, secret_request), "admin-typed-value").status_code == 302
    assert stored_value(agent) == "admin-typed-value"


def test_a_plain_member_is_refused_and_nothing_is_stored(agent, vault, gateway, plain_member):
    secret_request = waiting(agent)
    url = form_url(agent, secret_request)
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        page = http.get(url)
        assert page.status_code == 403 and 'type="password"' not in page.text
        token = csrf_token_in(http.get("/", follow_redirects=True).text)
        response = http.post(url, data={"csrfmiddlewaretoken": token, "value": "member-typed"})
        assert response.status_code == 403
    assert stored_value(agent) is None
    assert SecretRequest.objects.get(pk=secret_request.pk).status == SecretRequest.Status.WAITING


def test_a_stranger_from_another_workspace_sees_nothing(agent, vault, gateway, other_workspace):
    secret_request = waiting(agent)
    url = form_url(agent, secret_request)
    with logged_in(gateway, "stranger", STRANGER_PASSWORD) as http:
        assert http.get(url).status_code == 404
        token = csrf_token_in(http.get("/", follow_redirects=True).text)
        assert http.post(url, data={"csrfmiddlewaretoken": token, "value": "stranger"}).status_code == 404
    assert stored_value(agent) is None


def test_a_request_is_reached_only_through_its_own_thread(agent, vault, gateway, make_agent):
    secret_request = waiting(agent)
    elsewhere = make_agent()  # same workspace and owner, another thread
    url = f"/threads/{elsewhere.session.thread_id}/secrets/{secret_request.pk}/"
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert http.get(url).status_code == 404
    assert stored_value(agent) is None


def test_without_a_csrf_token_nothing_is_stored(agent, vault, gateway):
    secret_request = waiting(agent)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = http.post(form_url(agent, secret_request), data={"value": "no-csrf-value"})
        assert response.status_code == 403
    assert stored_value(agent) is None


def test_an_oversized_value_is_refused_and_nothing_is_stored(agent, vault, gateway):
    secret_request = waiting(agent)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = submit(http, form_url(agent, secret_request), "v" * (64 * 1024 + 1))
        assert response.status_code == 413 and "larger than 64 KiB" in response.text
        assert "v" * 1000 not in response.text
        exactly = submit(http, form_url(agent, secret_request), "w" * (64 * 1024))
        assert exactly.status_code == 302
    assert stored_value(agent) == "w" * (64 * 1024)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", "the value is empty"), ("a\x00bcdefg", "NUL"), ("abcde", "shorter than 6 characters")],
)
def test_an_empty_or_nul_value_is_refused(agent, vault, gateway, value, expected):
    secret_request = waiting(agent)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = submit(http, form_url(agent, secret_request), value)
        assert response.status_code == 409 and expected in response.text
    assert stored_value(agent) is None


def test_a_file_secret_can_be_uploaded(agent, vault, gateway):
    secret_request = waiting(agent, name="DEPLOY_KEY", file=True)
    key = "-----BEGIN KEY-----\nline-one\nline-two\n-----END KEY-----\n"
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = submit(http, form_url(agent, secret_request), "", file=("id_deploy", key.encode()))
        assert response.status_code == 302
    assert stored_value(agent, "DEPLOY_KEY") == key


def test_the_schema_is_the_seeds(agent):
    tool = next(t for t in agent.list_tools() if t.name == "request_secret")
    schema = tool.input_schema
    assert schema["required"] == ["name", "reason"]
    assert schema["properties"]["name"]["pattern"] == "^[A-Za-z_][A-Za-z0-9_]*$"
    assert schema["properties"]["name"]["maxLength"] == 128
    assert (schema["properties"]["reason"]["minLength"], schema["properties"]["reason"]["maxLength"]) == (3, 200)
    assert schema["properties"]["file"]["type"] == "boolean" and schema["properties"]["file"]["default"] is False
    assert "Limit: 10 per runner" in tool.description


def test_a_refusal_quoting_the_agents_input_shows_no_secret(agent, vault):
    secret_set(session=agent.session, name="DB_PASSWORD", value="pa55-w0rd-in-a-path")
    for server, tool, arguments in (
        (agent, "send_file", {"path": "/nowhere/pa55-w0rd-in-a-path.txt"}),
        (agent.nanoclaw, "edit_message", {"messageId": "pa55-w0rd-in-a-path", "text": "x"}),
    ):
        text = text_of(server.call(tool, arguments))
        assert "pa55-w0rd-in-a-path" not in text and "[redacted]" in text, text


def test_two_people_submitting_at_once_store_one_value_and_tell_the_agent_once(agent, vault, plain_member):
    plain_member.role = Member.Role.ADMIN
    plain_member.save()
    owner = Member.objects.get(workspace=agent.session.workspace, user__username="owner")
    secret_request = waiting(agent)
    barrier = threading.Barrier(2)

    def submit_as(member, value):
        barrier.wait()
        try:
            secret_request_fulfil(
                request_id=secret_request.pk, thread_id=agent.session.thread_id, member=member, value=value
            )
            return value
        except SecretRequestRefused as exc:
            return f"refused: {exc}"
        finally:
            close_old_connections()

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(submit_as, [owner, plain_member], ["owner-typed-1", "admin-typed-2"]))
    winners = [o for o in outcomes if not o.startswith("refused")]
    assert len(winners) == 1, outcomes
    assert any("already set by" in o for o in outcomes), outcomes
    assert stored_value(agent) == winners[0]
    told = Message.objects.filter(
        thread_id=agent.session.thread_id, kind=Message.Kind.SYSTEM, text__contains="was set by"
    )
    assert told.count() == 1


def test_the_same_request_made_at_once_posts_one_card(agent, vault):
    results = agent.call_many("request_secret", [{"name": "STRIPE_API_KEY", "reason": REASON}] * 4)
    texts = [text_of(r) for r in results]
    assert sum(not r.is_error for r in results) == 1, texts
    assert all("already waits in this thread" in t for r, t in zip(results, texts, strict=True) if r.is_error)
    assert SecretRequest.objects.filter(session=agent.session).count() == 1
    assert ToolCall.objects.filter(session=agent.session, tool="request_secret").count() == 1


def test_a_file_that_is_not_text_is_refused(agent, vault, gateway):
    secret_request = waiting(agent, name="DEPLOY_KEY", file=True)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = submit(http, form_url(agent, secret_request), "", file=("key.der", b"\x30\x82\xff\xfe binary"))
        assert response.status_code == 400 and "the file is not text (UTF-8); nothing was stored" in response.text
        too_big = submit(http, form_url(agent, secret_request), "", file=("big", b"k" * (64 * 1024 + 1)))
        assert too_big.status_code == 413 and "the file is larger than 64 KiB" in too_big.text
    assert stored_value(agent, "DEPLOY_KEY") is None
