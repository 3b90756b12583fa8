"""A permission prompt's allow buttons in Slack: a signed block_actions press over real HTTP, the
worker pressing it: the prompt is approved and the rule takes the command's first two words (a
Slack button holds no text field); the next prompt it matches is answered at once."""

import pytest

from approvals.models import ApprovalRule, PendingApproval
from tests.approvals.test_allow_rules import allowed_at_once, bash, still_asks
from tests.chat.conftest import slack_sender, slack_team, standin  # noqa: F401  (fixtures)
from tests.chat.test_slack_buttons import OWNER, ephemeral_to, owner, posted_button, press, slack_agent  # noqa: F401
from tests.tools.test_approval_prompt import answer_of, prompt, provider

pytestmark = pytest.mark.django_db(transaction=True)


def test_allow_always_in_slack_makes_a_rule_of_the_first_two_words(slack_agent, slack_sender, standin, owner):  # noqa: F811
    provider(slack_agent, "claude-code")
    future = prompt(slack_agent, "Bash", bash("cargo test --workspace -- --nocapture"))
    approval = PendingApproval.objects.get(id=_asked(slack_agent))
    element, card_ts = posted_button(standin, f"approval:{approval.id}:", "allow_agent")
    assert element["action_id"] == f"approval:{approval.id}:3"  # after Approve, Deny, Allow for this session
    assert element["text"]["text"] == "Allow always for this agent"

    press(slack_sender, element, user=OWNER, message_ts=card_ts)
    answer = ephemeral_to(standin, OWNER).params["text"]
    assert answer.startswith("Approved: Bash")
    assert "Bash commands starting with 'cargo test' in every session of agent" in answer
    assert answer_of(future)["behavior"] == "allow"
    rule = ApprovalRule.objects.get()
    assert (rule.scope, rule.command_prefix, rule.created_by_id) == ("agent", "cargo test", owner.id)
    assert PendingApproval.objects.get(id=approval.id).decided_via == "slack"

    allowed_at_once(slack_agent, "cargo test -p api")
    still_asks(slack_agent, "cargo testing")


def _asked(agent) -> int:
    from tests.conftest import wait_for

    return wait_for(lambda: PendingApproval.objects.filter(session=agent.session).values_list("id", flat=True).first())
