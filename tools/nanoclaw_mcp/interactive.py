"""ask_user_question and send_card (seed 002's interactive tools): thin adapters.

Every argument is checked by the services, so one refusal lists every problem in our
words; the schemas below still tell the agent the bounds.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, WithJsonSchema

from tools.adapter import call_service
from tools.auth import caller_from_context
from tools.results import Queued
from tools.services import questions
from tools.services.nanoclaw_cards import CARD_SCHEMA, MAX_FALLBACK, card_send

OPTION_SCHEMA = {
    "anyOf": [
        {"type": "string", "minLength": 1, "maxLength": questions.MAX_LABEL},
        {
            "type": "object",
            "properties": {
                "label": {"type": "string", "minLength": 1, "maxLength": questions.MAX_LABEL},
                "selectedLabel": {"type": "string", "minLength": 1, "maxLength": questions.MAX_LABEL},
                "value": {"type": "string", "minLength": 1, "maxLength": questions.MAX_VALUE},
            },
            "required": ["label"],
            "additionalProperties": False,
        },
    ]
}
OPTIONS_SCHEMA = {
    "type": "array",
    "items": OPTION_SCHEMA,
    "minItems": 1,
    "maxItems": questions.MAX_OPTIONS,
    "description": "Choices: plain strings or { label, selectedLabel?, value? } objects. A string is its own "
    "label and value; an object's value defaults to its label and selectedLabel (the button's text once "
    "chosen) to its label. Labels are unique.",
}
TIMEOUT_SCHEMA = {
    "type": "number",
    "minimum": questions.MIN_TIMEOUT,
    "maximum": questions.MAX_TIMEOUT,
    "default": questions.DEFAULT_TIMEOUT,
    "description": f"Seconds to wait (default: {questions.DEFAULT_TIMEOUT}).",
}


def _bounded_text(most: int, description: str):
    return Field(description=description, json_schema_extra={"minLength": 1, "maxLength": most})


ASK_DESCRIPTION = f"""Asks the people in this session's thread a question with buttons, and waits for the answer.

Blocking: the call returns when someone taps a button (the first tap by a member of the workspace wins),
with that option's value as text. The tapped button's text becomes its selectedLabel and the card says who
answered. If nobody answers within `timeout` seconds (default {questions.DEFAULT_TIMEOUT}, from
{questions.MIN_TIMEOUT} to {questions.MAX_TIMEOUT}), the call fails with an error saying the question timed out,
and the card says so. 1 to {questions.MAX_OPTIONS} options; labels and selectedLabels at most
{questions.MAX_LABEL} characters, values {questions.MAX_VALUE}; title at most {questions.MAX_TITLE}, question
{questions.MAX_QUESTION}. A question containing one of the session's secrets is refused."""


def _client_gone(ctx: Context):
    """A coroutine function that returns once the agent's HTTP request goes away, or None.

    The SDK answers a JSON-mode POST only when the tool returns and does not watch the
    connection meanwhile; the body is read, so uvicorn's receive() now answers only
    http.disconnect (it blocks until then: this is no poll)."""
    request = getattr(ctx.request_context, "request", None)
    if request is None:
        return None

    async def gone():
        while (await request.receive())["type"] != "http.disconnect":
            pass

    return gone


async def ask_user_question(
    title: Annotated[str, _bounded_text(questions.MAX_TITLE, "Short card title.")],
    question: Annotated[str, _bounded_text(questions.MAX_QUESTION, "The question text.")],
    options: Annotated[Any, WithJsonSchema(OPTIONS_SCHEMA)],
    ctx: Context,
    # Any, so that a boolean or a string is refused in our words, not quietly taken as a number.
    timeout: Annotated[Any, WithJsonSchema(TIMEOUT_SCHEMA)] = questions.DEFAULT_TIMEOUT,
) -> str:
    asked = await call_service(
        questions.question_ask,
        caller=caller_from_context(ctx),
        title=title,
        question=question,
        options=options,
        timeout=timeout,
    )
    try:
        return await questions.question_wait(asked, client_gone=_client_gone(ctx))
    except questions.QuestionTimedOut as exc:
        raise ToolError(str(exc)) from None


SEND_CARD_DESCRIPTION = """Posts a card into this session's thread and returns at once (no answer is awaited).

card: {title (1-150 characters), description (at most 3000), children?, actions?}.
- children (at most 40), in order: {"type": "text", "text"} (at most 3000 characters),
  {"type": "field", "label", "value"} (label at most 100, value a string of at most 1900 or a number;
  at most 10 fields), {"type": "divider"}.
- actions (at most 25), buttons in order: {label, url} opens an http(s) link; {label, value} is a choice:
  when someone presses it, "<person> chose <label>" arrives in your inbox as a new message (once per
  person per card; a second press is refused).
Labels are 1-75 characters, values at most 2000. fallbackText (default: the title) is the plain text
shown where cards are not rendered (Slack notifications). An invalid card is refused with every problem
listed; a card containing one of the session's secrets is refused."""


async def send_card(
    card: Annotated[dict[str, Any], WithJsonSchema({**CARD_SCHEMA, "description": "The card."})],
    ctx: Context,
    fallbackText: Annotated[  # noqa: N803 - the seed's parameter name
        str | None,
        Field(
            description="Plain-text fallback for platforms without cards.",
            json_schema_extra={"maxLength": MAX_FALLBACK},
        ),
    ] = None,
) -> Queued:
    result = await call_service(card_send, caller=caller_from_context(ctx), card=card, fallback_text=fallbackText)
    return Queued(tool_call_id=result["tool_call_id"], status=result["status"])


TOOLS = [
    ("ask_user_question", ask_user_question, ASK_DESCRIPTION),
    ("send_card", send_card, SEND_CARD_DESCRIPTION),
]
