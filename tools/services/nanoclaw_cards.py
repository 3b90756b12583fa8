"""send_card (seed 002): check the card, lay it out, record it; and presses on its choices.

The card is {title, description, children?, actions?}. It is laid out as the same items
post_card's cards use (tools/card_spec/layout.py), so the web thread and Block Kit render
it alike. A link action is a link button; an action with a value is a choice, and a
person's first press on a card's choices reaches the agent's inbox (once per person).
"""

import re
from typing import Annotated, Any, Literal

from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, StringConstraints, ValidationError, model_validator

from calvin.events import MessagePosted, announce
from calvin.presses import ActionRefused
from sessions.models import Message
from sessions.services import inbox_post
from tools.caller import Caller
from tools.card_spec.blockkit import MAX_BLOCKS, card_blocks
from tools.card_spec.layout import pydantic_problems
from tools.errors import ToolRefused
from tools.models import CardChoice, ToolCall
from tools.services.common import refuse_secrets, secret_scanner_for, strings_in, tool_call_record

MAX_CHILDREN = 40
MAX_ACTIONS = 25
MAX_FIELDS = 10  # Slack shows at most 10 fields in a section
MAX_FALLBACK = 3000
MAX_PROBLEMS_SHOWN = 30


def _text(most: int, least: int = 1):
    return Annotated[str, StringConstraints(min_length=least, max_length=most)]


FINITE = Annotated[float, Field(allow_inf_nan=False)]
EXACT_INT = Annotated[int, Field(ge=-(2**53), le=2**53)]  # what a browser's JSON keeps exactly


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CardChild(_Strict):
    """{type: "text", text} | {type: "field", label, value} | {type: "divider"}."""

    type: Literal["text", "field", "divider"]
    text: _text(3000) | None = None
    label: _text(100) | None = None
    value: _text(1900) | EXACT_INT | FINITE | None = None

    @model_validator(mode="after")
    def _props_of_its_type(self):
        wanted = {"text": ("text",), "field": ("label", "value"), "divider": ()}[self.type]
        given = tuple(name for name in ("text", "label", "value") if getattr(self, name) is not None)
        if given != wanted:
            props = " and ".join(wanted) or "no other property"
            raise ValueError(f"a {self.type} child has {props} (got {', '.join(given) or 'none'})")
        return self


class CardAction(_Strict):
    """{label, url}: a link button; {label, value}: a choice whose press reaches the agent."""

    label: _text(75)
    url: HttpUrl | None = None
    value: _text(2000) | None = None

    @model_validator(mode="after")
    def _link_or_choice(self):
        if (self.url is None) == (self.value is None):
            raise ValueError("an action has either a url (a link) or a value (a choice)")
        return self


class SendCard(_Strict):
    title: _text(150)
    description: _text(3000, least=0)
    children: list[CardChild] = Field(default_factory=list, max_length=MAX_CHILDREN)
    actions: list[CardAction] = Field(default_factory=list, max_length=MAX_ACTIONS)


def _inlined(schema: dict) -> dict:
    """The model's JSON schema with its $defs inlined: it sits inside the tool's input schema."""
    defs = schema.pop("$defs", {})

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, list) else node

    return walk(schema)


CARD_SCHEMA = _inlined(SendCard.model_json_schema())


def _child_item(child: CardChild) -> dict[str, Any]:
    if child.type == "text":
        return {"kind": "text", "text": child.text}
    if child.type == "field":
        value = child.value
        if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
            value = int(value)  # 42.0 shows as 42
        return {"kind": "field", "label": child.label, "value": str(value)}
    return {"kind": "divider"}


def card_items(card: SendCard, *, target_id: int) -> list[dict]:
    """Header, description, children, then the actions: runs of links as link buttons, runs
    of choices as rows of buttons whose value is the action's index in `card.actions`."""
    items: list[dict] = [{"kind": "header", "text": card.title}]
    if card.description.strip():
        items.append({"kind": "text", "text": card.description})
    for child in card.children:
        item = _child_item(child)
        if item["kind"] == "field":
            if items[-1]["kind"] != "fields":
                items.append({"kind": "fields", "items": []})
            items[-1]["items"].append(item)
        else:
            items.append(item)
    for i, action in enumerate(card.actions):
        if action.url is not None:
            kind, button = "buttons", {"label": action.label, "url": str(action.url)}
        else:
            kind, button = "actions", {"label": action.label, "value": str(i)}
        if items[-1]["kind"] != kind:
            row = {"kind": kind} if kind == "buttons" else {"kind": kind, "action": "choice", "target_id": target_id}
            items.append({**row, "items": []})
        items[-1]["items"].append(button)
    return items


# pydantic's words for a wrong type, in ours.
_PLAIN = [
    (re.compile(r"Input should be a valid dictionary or instance of \w+"), "must be an object"),
    (re.compile(r"Input should be a valid (string|list)"), r"must be a \1"),
]


def _plain(problem: str) -> str:
    for pattern, words in _PLAIN:
        problem = pattern.sub(words, problem)
    return problem


def _problems(card, fallback_text) -> tuple[SendCard | None, list[str]]:
    problems = []
    try:
        spec = SendCard.model_validate(card)
    except ValidationError as exc:
        spec, problems = None, [_plain(p) for p in pydantic_problems("card", exc)]
    if fallback_text is not None and len(fallback_text) > MAX_FALLBACK:
        problems.append(f"fallbackText: at most {MAX_FALLBACK} characters (got {len(fallback_text)})")
    if spec is not None:
        fields = sum(child.type == "field" for child in spec.children)
        if fields > MAX_FIELDS:
            problems.append(f"card: at most {MAX_FIELDS} field children (got {fields})")
        blocks = len(card_blocks(card_items(spec, target_id=0)))
        if blocks > MAX_BLOCKS:
            problems.append(f"card: at most {MAX_BLOCKS} Slack blocks (this card needs {blocks})")
    return spec, problems


@transaction.atomic
def card_send(*, caller: Caller, card, fallback_text: str | None) -> dict:
    spec, problems = _problems(card, fallback_text)
    if problems:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        if len(problems) > MAX_PROBLEMS_SHOWN:
            shown.append(f"and {len(problems) - MAX_PROBLEMS_SHOWN} more problems")
        raise ToolRefused("invalid card: " + "; ".join(shown))
    arguments = {"card": spec.model_dump(mode="json", exclude_none=True), "fallbackText": fallback_text}
    scanner = secret_scanner_for(caller)
    refuse_secrets(what="the card", secrets=scanner, content="\n".join(strings_in(arguments)))
    text = fallback_text or spec.title
    call = tool_call_record(
        caller=caller,
        tool="send_card",
        server=ToolCall.Server.NANOCLAW,
        arguments=arguments,
        payload={},
        secrets=scanner,
    )
    # A choice names the call, whose id exists only now; the effect task reads this after commit.
    items = card_items(spec, target_id=call.id)
    ToolCall.objects.filter(id=call.id).update(payload={"items": items, "blocks": card_blocks(items), "text": text})
    return {"tool_call_id": call.id, "status": call.status}


def card_choice_pressed(*, thread, member, target_id: int, value: str, via: str) -> str:
    """A choice pressed on a send_card card (calvin.dashboard.actions): the agent hears of
    each person's first choice on the card, once; a second press is told the first."""
    if member.workspace_id != thread.workspace_id:
        raise ActionRefused("only members of this thread's workspace can choose")
    message = (
        Message.objects.filter(
            thread=thread,
            tool_call_id=target_id,
            tool_call__server=ToolCall.Server.NANOCLAW,
            tool_call__tool="send_card",
        )
        .select_related("tool_call__session")
        .first()
    )
    if message is None:
        raise ActionRefused("there is no such card in this thread")
    card = message.tool_call.arguments["card"]
    actions = card.get("actions", [])
    index = int(value) if value.isdecimal() else -1
    if not 0 <= index < len(actions) or "value" not in actions[index]:
        raise ActionRefused("that is not one of the card's choices")
    with transaction.atomic():
        # The unique (message, member) row makes a double press, even a concurrent one, deliver once.
        choice, created = CardChoice.objects.get_or_create(
            message=message, member=member, defaults={"action_index": index}
        )
        if created:
            action = actions[index]
            text = f"{member} chose {action['label']}"
            if action["value"] != action["label"]:
                text += f" (value: {action['value']})"
            inbox_post(session=message.tool_call.session, text=f'{text} on the card "{card["title"]}"', member=member)
            # Pages watching the thread show the card with the choice marked (and who chose what).
            changed = MessagePosted(
                workspace_id=thread.workspace_id, thread_id=thread.id, message_id=message.id, replace=True
            )
            announce(changed)
    if not created:
        raise ActionRefused(f"you already chose {actions[choice.action_index]['label']}")
    return f"Sent to the agent: you chose {actions[index]['label']}"
