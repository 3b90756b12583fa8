"""Through Slack for real (signed payloads to the gateway, a stand-in Web API, a Celery worker): the
requested secret's modal writes one secret.set from "slack" and a second submission none."""

import pytest

from calvin.audit.models import AuditEvent
from tests.chat.conftest import slack_sender, slack_team, standin  # noqa: F401 (fixtures)
from tests.chat.test_slack_buttons import OWNER, block_actions, owner, slack_agent  # noqa: F401
from tests.chat.test_slack_secret_modal import opened_view, secret_card_button, submission

pytestmark = pytest.mark.django_db(transaction=True)

VALUE = "sk_live_audit_never_logged_42"


def test_a_secret_set_through_the_slack_modal_is_recorded_once_from_slack(slack_agent, slack_sender, standin, owner):  # noqa: F811
    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger()))
    view = opened_view(standin)
    assert slack_sender.interaction(submission(view, VALUE)).text == ""
    assert "errors" in slack_sender.interaction(submission(view, VALUE + "x")).json()  # already set: nothing
    (event,) = AuditEvent.objects.filter(verb__startswith="secret.")
    assert (event.verb, event.via, event.actor_label, event.workspace_id) == (
        "secret.set",
        "slack",
        str(owner),
        slack_agent.session.workspace_id,
    )
    assert event.changes == {"name": [None, request.name], "scope": [None, f"session {slack_agent.session.id}"]}
    assert VALUE not in str(event.changes) + event.target_label
