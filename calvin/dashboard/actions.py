"""Buttons people press on cards: a question's options, an approval's decision, a card's choices.

A card item {"kind": "actions", "action": <name>, "target_id": <id>, "items": [...]} is a
row of buttons; pressing one reaches the handler named here with the thread it was pressed
in, the member who pressed it, and the button's value. The web channel calls them from
`action_press` (calvin/dashboard/views.py); the Slack adapter will call the same handlers
from interactivity payloads. Each handler checks that the target lives in that thread and
that the member may press it, changes state by compare-and-swap, and returns the text to
show the person who pressed.

A permission prompt's allow buttons ("Allow for this session", "Allow always for this agent") are
the "approval" action's too; in the web channel they sit in a form of their own with the Bash
command prefix the rule takes (`allow_press`), which Slack's buttons cannot carry.

One action is not pressed here: "secret" (request_secret's "Set NAME") opens a private
form instead, a link in the web channel (calvin/dashboard/secret_form.py) and a modal in
Slack, so the value never travels through the thread.
"""

from django.utils.module_loading import import_string

from calvin.presses import ActionRefused  # the handlers' refusal, a leaf below them

__all__ = ["HANDLERS", "ActionRefused", "action_press", "allow_press"]


HANDLERS = {
    "question": "tools.services.questions.question_answer_pressed",
    "approval": "approvals.services.approval_decision_pressed",
    "choice": "tools.services.nanoclaw_cards.card_choice_pressed",
}


def action_press(*, action: str, thread, member, target_id: int, value: str, via: str) -> str:
    path = HANDLERS.get(action)
    if path is None:
        raise ActionRefused(f"unknown action {action}")
    if member is None:
        raise ActionRefused("only members of this workspace can press this")
    return import_string(path)(thread=thread, member=member, target_id=target_id, value=value, via=via)


def allow_press(*, thread, member, target_id: int, value: str, prefix: str | None, via: str) -> str:
    """A permission prompt's allow button pressed in the web channel's form, with the prefix typed there."""
    handler = import_string("approvals.rule_services.approval_allow_pressed")
    return handler(thread=thread, member=member, target_id=target_id, value=value, prefix=prefix, via=via)
