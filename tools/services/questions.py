"""ask_user_question: check and record the question, wait for its answer, take the first tap.

The card is posted by the worker like any card. The waiting tool call holds no thread and
no database connection: it listens on a channel-layer group for its question, and the
transaction that answers (or expires) the question sends to that group once it commits.
Answering and expiring are compare-and-swap updates on the open question, so exactly one
of them wins, and the card is edited in place to say which.
"""

import asyncio
import logging
import math
from datetime import timedelta
from typing import NamedTuple

from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from calvin.channel_push import group_send
from calvin.chat import ChatPermanentError, ChatTemporaryError
from calvin.events import QuestionChanged, announce
from calvin.presses import ActionRefused
from tools.caller import Caller
from tools.card_spec.blockkit import card_blocks
from tools.errors import ToolRefused
from tools.models import Question, ToolCall
from tools.services.card_edits import tool_call_card_replace
from tools.services.common import off_loop, refuse_secrets, secret_scanner_for, strings_in, tool_call_record

log = logging.getLogger(__name__)

# Slack's bounds for what the card shows: 25 buttons per actions block, 75 characters of
# button text, 2,000 of button value, 150 of header, 3,000 of section text.
MAX_OPTIONS = 25
MAX_LABEL = 75
MAX_VALUE = 2000
MAX_TITLE = 150
MAX_QUESTION = 3000
DEFAULT_TIMEOUT = 300
MIN_TIMEOUT, MAX_TIMEOUT = 1, 3600
MAX_PROBLEMS_SHOWN = 30
OPTION_KEYS = ("label", "selectedLabel", "value")

OPEN, ANSWERED, EXPIRED = Question.Status.OPEN, Question.Status.ANSWERED, Question.Status.EXPIRED


class Decision(NamedTuple):
    status: str
    index: int | None = None


class QuestionTimedOut(Exception):
    """Nobody answered in time (or the question was closed): the tool answers with this error."""


# ---------------------------------------------------------------- checking the call


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {list: "array", dict: "object", str: "string"}.get(type(value), type(value).__name__)


def _text_problems(where: str, value, most: int) -> list[str]:
    if not isinstance(value, str):
        return [f"{where}: must be a string (got {_json_type(value)})"]
    if not value.strip():
        return [f"{where}: must not be empty"]
    if len(value) > most:
        return [f"{where}: at most {most} characters (got {len(value)})"]
    return []


def _option(where: str, option, problems: list[str]) -> dict | None:
    """One option as {label, selectedLabel, value}, or None (its problems appended)."""
    if isinstance(option, str):
        found = _text_problems(where, option, MAX_LABEL)
        problems.extend(found)
        return None if found else {"label": option, "selectedLabel": option, "value": option}
    if not isinstance(option, dict):
        problems.append(
            f"{where}: must be a string or an object {{label, selectedLabel?, value?}} (got {_json_type(option)})"
        )
        return None
    before = len(problems)
    unknown = [key for key in option if key not in OPTION_KEYS]
    if unknown:
        names = ", ".join(repr(k) for k in unknown[:5])
        problems.append(f"{where}: unknown properties {names} (an option has label, selectedLabel and value)")
    if "label" not in option:
        problems.append(f"{where}.label: required")
    else:
        problems.extend(_text_problems(f"{where}.label", option["label"], MAX_LABEL))
    for key, most in (("selectedLabel", MAX_LABEL), ("value", MAX_VALUE)):
        if option.get(key) is not None:
            problems.extend(_text_problems(f"{where}.{key}", option[key], most))
    if len(problems) > before:
        return None
    label = option["label"]
    return {
        "label": label,
        "selectedLabel": option.get("selectedLabel") or label,
        "value": label if option.get("value") is None else option["value"],
    }


def options_problems(options) -> tuple[list[dict], list[str]]:
    """The options normalised, and every problem with them."""
    if not isinstance(options, list):
        kind = _json_type(options)
        return [], [f"options: must be a list of strings or {{label, selectedLabel?, value?}} objects (got {kind})"]
    problems = []
    if not options:
        problems.append("options: give at least one option")
    if len(options) > MAX_OPTIONS:
        problems.append(f"options: at most {MAX_OPTIONS} options (got {len(options)})")
    normalised, first_with_label = [], {}
    for i, option in enumerate(options):
        where = f"options[{i}]"
        checked = _option(where, option, problems)
        if checked is None:
            continue
        earlier = first_with_label.setdefault(checked["label"], i)
        if earlier != i:
            problems.append(
                f"{where}: the label {checked['label']!r} is also options[{earlier}]'s (labels must be unique)"
            )
        normalised.append(checked)
    return normalised, problems


def timeout_problems(timeout) -> list[str]:
    if timeout is None:
        return [f"timeout: must be a number of seconds (got null; leave it out for the default {DEFAULT_TIMEOUT})"]
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        return [f"timeout: must be a number of seconds (got {_json_type(timeout)})"]
    if not math.isfinite(timeout):
        return ["timeout: must be a finite number of seconds (not NaN or Infinity)"]
    if not MIN_TIMEOUT <= timeout <= MAX_TIMEOUT:
        return [f"timeout: must be between {MIN_TIMEOUT} and {MAX_TIMEOUT} seconds (got {timeout:g})"]
    return []


def _refusal(problems: list[str]) -> ToolRefused:
    shown = problems[:MAX_PROBLEMS_SHOWN]
    if len(problems) > MAX_PROBLEMS_SHOWN:
        shown.append(f"and {len(problems) - MAX_PROBLEMS_SHOWN} more problems")
    return ToolRefused("invalid question: " + "; ".join(shown))


# ---------------------------------------------------------------- the card


def question_group(question_id: int) -> str:
    return f"question.{question_id}"


def question_items(question: Question, note: str | None = None) -> list[dict]:
    """The card: title, question, one row of buttons whose value is the option's index
    (an option's own value can be 2,000 characters; a button's form value cannot)."""
    decided = question.status != OPEN
    buttons = []
    for i, option in enumerate(question.options):
        chosen = question.status == ANSWERED and i == question.answer_index
        button = {"label": option["selectedLabel"] if chosen else option["label"], "value": str(i)}
        if decided:
            button["disabled"] = True
        if chosen:
            button.update(chosen=True, style="primary")
        buttons.append(button)
    items = [
        {"kind": "header", "text": question.title},
        {"kind": "text", "text": question.text},
        {"kind": "actions", "action": "question", "target_id": question.tool_call_id, "items": buttons},
    ]
    if note:
        items.append({"kind": "note", "text": note})
    return items


def _card_payload(items: list[dict], title: str) -> dict:
    return {"items": items, "blocks": card_blocks(items), "text": title}


def _card_show(question: Question, note: str, result: dict) -> None:
    """Store the card as it is now (a card posted later shows it) and edit the posted one in place.

    A failed edit does not undo the answer: the decision stands, the card catches up on
    the next press (see `_answer`)."""
    payload = _card_payload(question_items(question, note), question.title)
    try:
        tool_call_card_replace(tool_call_id=question.tool_call_id, payload=payload, result=result)
    except (ChatTemporaryError, ChatPermanentError):
        log.warning("could not edit the card of question call %s", question.tool_call_id, exc_info=True)


def _question_changed(question_id: int, status: str, *, caller: Caller | None = None, tool_call_id: int = 0) -> None:
    if caller is None:
        row = Question.objects.filter(id=question_id).values_list(
            "tool_call_id", "tool_call__session_id", "tool_call__session__workspace_id", "tool_call__session__thread_id"
        )
        tool_call_id, session_id, workspace_id, thread_id = row.get()
    else:
        session_id, workspace_id, thread_id = caller.session_id, caller.workspace_id, caller.thread_id
    announce(
        QuestionChanged(
            workspace_id=workspace_id,
            thread_id=thread_id,
            session_id=session_id,
            question_id=question_id,
            tool_call_id=tool_call_id,
            status=status,
        )
    )


def _push_on_commit(question_id: int, decision: Decision) -> None:
    """Wake the waiting tool call once the decision is committed (a rolled-back one wakes nobody).

    Registered before the card edit's own push, so the agent hears first. A lost push
    costs time, not the answer: the waiter finds it when its timeout's expiry loses the CAS.
    """
    event = {"type": "question.decided", "status": decision.status, "index": decision.index}

    def push():
        try:
            group_send(question_group(question_id), event)
        except Exception:
            log.warning("could not wake the call waiting for question %s", question_id, exc_info=True)

    transaction.on_commit(push)


# ---------------------------------------------------------------- asking


@transaction.atomic
def question_ask(*, caller: Caller, title: str, question: str, options, timeout) -> dict:
    normalised, problems = options_problems(options)
    problems = [
        *_text_problems("title", title, MAX_TITLE),
        *_text_problems("question", question, MAX_QUESTION),
        *problems,
        *timeout_problems(timeout),
    ]
    if problems:
        raise _refusal(problems)
    scanner = secret_scanner_for(caller)
    refuse_secrets(what="the question", secrets=scanner, content="\n".join([title, question, *strings_in(normalised)]))
    timeout = float(timeout)
    call = tool_call_record(
        caller=caller,
        tool="ask_user_question",
        server=ToolCall.Server.NANOCLAW,
        arguments={"title": title, "question": question, "options": options, "timeout": timeout},
        payload={},
        secrets=scanner,
    )
    asked = Question.objects.create(
        tool_call=call,
        title=title,
        text=question,
        options=normalised,
        expires_at=timezone.now() + timedelta(seconds=timeout),
    )
    # The buttons name the call, whose id exists only now; the effect task reads this after commit.
    ToolCall.objects.filter(id=call.id).update(payload=_card_payload(question_items(asked), title))
    _question_changed(asked.id, OPEN, caller=caller, tool_call_id=call.id)
    return {
        "question_id": asked.id,
        "tool_call_id": call.id,
        "options": normalised,
        "timeout": timeout,
        "expires_at": asked.expires_at,
    }


def question_decision(*, question_id: int) -> Decision | None:
    """How the question was decided, or None while it is open."""
    row = Question.objects.filter(id=question_id).values_list("status", "answer_index").first()
    return None if row is None or row[0] == OPEN else Decision(*row)


def question_expire(*, question_id: int, note: str) -> Decision:
    """open -> expired, unless an answer won first: then that answer."""
    with transaction.atomic():
        closed = Question.objects.filter(id=question_id, status=OPEN).update(status=EXPIRED)
        question = Question.objects.select_related("answered_by").get(id=question_id)
        if closed:
            _question_changed(question.id, EXPIRED)
            _push_on_commit(question.id, Decision(EXPIRED))
            _card_show(question, note, {"status": "expired", "note": note})
    return Decision(question.status, question.answer_index)


# A waiting call closes its own question at the deadline; one still open this long after it
# lost its waiter (a gateway that stopped), and is closed by the sweep.
OVERDUE_GRACE = timedelta(seconds=30)
OVERDUE_NOTE = "Closed: the agent's call ended without waiting for an answer (the gateway restarted)."


def questions_close_overdue(*, now) -> int:
    overdue = Question.objects.filter(status=OPEN, expires_at__lt=now - OVERDUE_GRACE).values_list("id", flat=True)
    return sum(question_expire(question_id=i, note=OVERDUE_NOTE).status == EXPIRED for i in overdue[:500])


def _timed_out_note(timeout: float) -> str:
    return f"Timed out after {timeout:g} seconds; nobody answered."


CLOSED_NOTE = "Closed: the agent stopped waiting for an answer."
WAKE = "question.wake"


async def _first_of(layer, channel: str, gone, timeout: float):
    """("answer", event) | ("gone", None) | ("timeout", None), whichever comes first."""
    answer = asyncio.ensure_future(layer.receive(channel))
    watching = asyncio.ensure_future(gone()) if gone is not None else None
    try:
        done, _ = await asyncio.wait({answer, watching} - {None}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if watching is not None:
            watching.cancel()
        if not answer.done():
            # Wake the receive with a message of our own instead of cancelling it: a cancelled
            # channels_redis receive was seen staying blocked in redis-py's read, for good.
            await layer.send(channel, {"type": WAKE})
    event = await answer
    if event.get("type") != WAKE:
        return "answer", event
    return ("gone", None) if watching in done else ("timeout", None)


async def question_wait(asked: dict, client_gone=None) -> str:
    """The tapped option's value, or QuestionTimedOut.

    Subscribes before it looks at the database, so an answer committed in between is seen
    by one or the other; then sleeps on the channel layer until the push, the deadline, or
    (`client_gone`, a coroutine function) the agent's request going away: a question nobody
    waits for any more is closed, so no one answers into the void.
    """
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = question_group(asked["question_id"])
    question_id, timeout = asked["question_id"], asked["timeout"]
    try:
        await layer.group_add(group, channel)
        decision = await off_loop(question_decision)(question_id=question_id)
        if decision is None:
            remaining = max((asked["expires_at"] - timezone.now()).total_seconds(), 0)
            what, event = await _first_of(layer, channel, client_gone, remaining)
            if what == "answer":
                decision = Decision(event["status"], event.get("index"))
            else:
                note = CLOSED_NOTE if what == "gone" else _timed_out_note(timeout)
                decision = await off_loop(question_expire)(question_id=question_id, note=note)
    except asyncio.CancelledError:
        await off_loop(question_expire)(question_id=question_id, note=CLOSED_NOTE)
        raise
    finally:
        await layer.group_discard(group, channel)
    if decision.status == ANSWERED:
        return asked["options"][decision.index]["value"]
    raise QuestionTimedOut(f"the question timed out after {timeout:g} seconds without an answer")


# ---------------------------------------------------------------- answering


def _option_index(question: Question, value: str) -> int:
    if value.isdecimal() and int(value) < len(question.options):
        return int(value)
    raise ActionRefused("that is not one of the question's options")


def _answer_audited(question: Question, *, member, index: int, via: str) -> None:
    from calvin.audit.services import audit_record

    audit_record(
        verb="question.answer",
        workspace=question.tool_call.session.workspace_id,
        actor=member,
        target=question,
        changes={"status": (OPEN, ANSWERED), "answer": (None, question.options[index]["label"])},
        via=via,
    )


def _answer(*, question: Question, member, index: int, via: str) -> tuple[bool, Question]:
    """(True, the question) when this tap won: open -> answered in one conditional UPDATE;
    else (False, the question as it is now)."""
    now = timezone.now()
    with transaction.atomic():
        won = Question.objects.filter(id=question.id, status=OPEN, expires_at__gt=now).update(
            status=ANSWERED, answer_index=index, answered_by=member, answered_at=now
        )
        if won:
            question.status, question.answer_index, question.answered_by = ANSWERED, index, member
            _answer_audited(question, member=member, index=index, via=via)
            _question_changed(question.id, ANSWERED)
            _push_on_commit(question.id, Decision(ANSWERED, index))
            result = {"status": "answered", "value": question.options[index]["value"], "by": str(member), "via": via}
            _card_show(question, f"Answered by {member}", result)
            return True, question
        current = Question.objects.select_related("answered_by", "tool_call").get(id=question.id)
        if current.status == OPEN:  # past its deadline and nobody expired it (the waiting gateway went away)
            note = _timed_out_note(current.tool_call.arguments.get("timeout", DEFAULT_TIMEOUT))
            current.status = question_expire(question_id=current.id, note=note).status
        else:  # the card may have been posted before the decision: let it catch up
            try:
                tool_call_card_replace(tool_call_id=current.tool_call_id, payload=current.tool_call.payload)
            except (ChatTemporaryError, ChatPermanentError):
                log.warning("could not edit the card of question call %s", current.tool_call_id, exc_info=True)
        return False, current


WHO_MAY_ANSWER = "only the person who started this session or an owner or admin of its workspace can answer"


def question_answer_pressed(*, thread, member, target_id: int, value: str, via: str) -> str:
    """A button on a question card (calvin.dashboard.actions): the first tap by someone who
    decides for the session (as for approvals) answers it; any other press changes nothing
    and says why."""
    if member.workspace_id != thread.workspace_id:
        raise ActionRefused("only members of this thread's workspace can answer")
    question = (
        Question.objects.filter(tool_call_id=target_id, tool_call__session__thread_id=thread.id)
        .select_related("tool_call__session")
        .first()
    )
    if question is None:
        raise ActionRefused("there is no such question in this thread")
    if not question.tool_call.session.may_be_decided_by(member):
        raise ActionRefused(WHO_MAY_ANSWER)
    index = _option_index(question, value)
    won, current = _answer(question=question, member=member, index=index, via=via)
    if won:
        return f"Answered: {current.options[index]['selectedLabel']}"
    if current.status == ANSWERED:
        label = current.options[current.answer_index]["label"]
        raise ActionRefused(f"already answered by {current.answered_by or 'someone'}: {label}")
    raise ActionRefused("this question is closed: the agent is no longer waiting for an answer")
