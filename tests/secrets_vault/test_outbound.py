"""Which secrets an agent's outbound content is checked against: its session's, its agent's
and its workspace's, and no one else's."""

import base64
import copy

import pytest

from calvin.workspaces.services import agent_create, workspace_create
from secrets_vault.services import secret_put, secret_set
from tests.conftest import text_of
from tests.hostile import VALID_CALLS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("vault")]


def say(agent, text: str):
    return agent.nanoclaw.call("send_message", {"text": text, "to": "thread"})


def test_an_agent_level_secret_alone_is_checked(agent):
    session = agent.session
    secret_put(workspace_id=session.workspace_id, agent_id=session.agent_id, name="AGENT_KEY", value="agent-k3y-value")
    result = say(agent, "the key is agent-k3y-value")
    assert result.is_error and "the secret AGENT_KEY" in text_of(result)


def test_a_workspace_level_secret_alone_is_checked(agent):
    secret_put(workspace_id=agent.session.workspace_id, name="ORG_KEY", value="0rg-k3y-value")
    result = say(agent, "the key is 0rg-k3y-value")
    assert result.is_error and "the secret ORG_KEY" in text_of(result)


def test_other_places_secrets_are_not_this_sessions(agent, make_agent, django_user_model):
    workspace = agent.session.workspace
    other_agent = agent_create(workspace=workspace, name="other-agent")
    secret_put(workspace_id=workspace.id, agent_id=other_agent.id, name="OTHER_AGENT", value="other-agent-value")
    secret_set(session=make_agent().session, name="OTHER_SESSION", value="other-session-value")
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    secret_put(workspace_id=globex.id, name="GLOBEX", value="globex-wide-value")
    for value in ("other-agent-value", "other-session-value", "globex-wide-value"):
        result = say(agent, f"harmless here: {value}")
        assert not result.is_error, text_of(result)


def test_a_secret_set_replaced_or_deleted_is_seen_by_the_next_call(agent):
    session = agent.session
    secret = secret_set(session=session, name="TOKEN", value="first-value-1")
    assert say(agent, "first-value-1").is_error
    secret_set(session=session, name="TOKEN", value="second-value-2")  # replaced in place
    assert say(agent, "second-value-2").is_error
    assert not say(agent, "first-value-1").is_error
    secret_put(workspace_id=session.workspace_id, name="ORG", value="org-value-3")  # one more place
    assert say(agent, "org-value-3").is_error
    secret.delete()
    assert not say(agent, "second-value-2").is_error
    assert say(agent, "org-value-3").is_error


def percent_every_byte(value: str) -> str:
    return "".join(f"%{byte:02X}" for byte in value.encode())


def test_a_value_percent_encoded_byte_by_byte_is_refused_by_send_message_and_post_card(agent):
    secret_set(session=agent.session, name="DEPLOY_TOKEN", value="Deploy-t0ken-value")
    escaped = percent_every_byte("Deploy-t0ken-value")
    assert escaped.startswith("%44%65%70")  # letters and digits too, which quote() leaves alone
    result = say(agent, f"callback https://example.com/hook?t={escaped}")
    assert result.is_error and "the secret DEPLOY_TOKEN" in text_of(result)
    card = copy.deepcopy(VALID_CALLS["calvin"]["post_card"])
    card["spec"]["elements"]["t"]["props"]["text"] = f"see {escaped.lower()}"
    result = agent.call("post_card", card)
    assert result.is_error and "the secret DEPLOY_TOKEN" in text_of(result)
    assert not say(agent, "callback https://example.com/hook?t=%44%65%70").is_error


def test_escaped_and_wrapped_values_are_refused_over_mcp(agent):
    value = "wr4pped-and-escaped-secret"
    secret_set(session=agent.session, name="API_KEY", value=value)
    pem = "\n".join(
        base64.b64encode(b"\x00" * 45 + value.encode() + b"\x00" * 45).decode()[i : i + 64] for i in range(0, 160, 64)
    )
    for text in (
        "".join(f"\\u{ord(c):04x}" for c in value),
        "".join(f"&#{ord(c)};" for c in value),
        f"-----BEGIN KEY-----\n{pem}\n-----END KEY-----",
    ):
        result = say(agent, text)
        assert result.is_error and "the secret API_KEY" in text_of(result), text
