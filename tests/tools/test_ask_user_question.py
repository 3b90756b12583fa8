"""ask_user_question over real MCP with the real worker: the card, taps through the web
channel's action URL, the first tap winning, timeouts, refusals, and waiting without
holding a thread, a database connection or a polling loop."""

import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import httpx2
import pytest
from django.db import transaction
from django.db.backends.utils import CursorWrapper

from calvin.dashboard.actions import ActionRefused
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from secrets_vault.crypto import new_key
from secrets_vault.services import secret_set
from sessions.models import Message
from sessions.services import session_start
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import (
    MEMBER_PASSWORD,
    OWNER_PASSWORD,
    STRANGER_PASSWORD,
    csrf_token_in,
    logged_in,
)
from tools.models import Question, ToolCall
from tools.services import questions

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = ["Yes", {"label": "Ship it", "selectedLabel": "Shipped", "value": "ship"}, {"label": "Wait"}]


@pytest.fixture
def stranger(django_user_model):
    """Another tenant's owner (Globex) and a session in Globex: no member of Acme."""
    user = django_user_model.objects.create_user("stranger", password=STRANGER_PASSWORD)
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    member = Member.objects.get(workspace=globex, user=user)
    return member, session_start(workspace=globex, owner=member, title="Globex plan")


def ask(agent, **arguments) -> Future:
    """Call ask_user_question in the background (it blocks until answered or timed out)."""
    arguments = {"title": "Release", "question": "Ship release 7 now?", "options": OPTIONS, **arguments}
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(agent.nanoclaw.call, "ask_user_question", arguments)
    pool.shutdown(wait=False)
    return future


def posted_card(agent, after: int = 0) -> Message:
    """The question card the worker posted into the session's thread."""
    return wait_for(
        lambda: (
            Message.objects.filter(thread=agent.session.thread, kind=Message.Kind.CARD, id__gt=after)
            .order_by("id")
            .first()
        ),
        timeout=20,
    )


def tap(http, thread_id: int, target_id: int, value, action: str = "question"):
    """Press a card button as the thread page's script does: a POST with the page's CSRF token."""
    page = http.get(f"/threads/{thread_id}/")
    token = csrf_token_in(page.text) if page.status_code == 200 else http.cookies.get("csrftoken", "")
    return http.post(
        f"/threads/{thread_id}/actions/{action}/{target_id}/",
        data={"value": str(value)},
        headers={"X-CSRFToken": token, "Accept": "application/json"},
    )


def press_in_service(question_id: int, member, value: str) -> None:
    """A press straight into the service (as a web tap or the Slack adapter would make it)."""
    question = Question.objects.select_related("tool_call__session__thread").get(id=question_id)
    questions.question_answer_pressed(
        thread=question.tool_call.session.thread, member=member, target_id=question.tool_call_id, value=value, via="web"
    )


def buttons(message: Message) -> list[dict]:
    return next(item for item in message.card if item["kind"] == "actions")["items"]


def notes(message: Message) -> list[str]:
    return [item["text"] for item in message.card if item["kind"] == "note"]


# ---------------------------------------------------------------- answering


@pytest.mark.parametrize(
    ("index", "value", "shown"),
    [(0, "Yes", "Yes"), (1, "ship", "Shipped"), (2, "Wait", "Wait")],
    ids=["string-is-its-own-value", "object-value-and-selectedLabel", "object-value-defaults-to-label"],
)
def test_a_tap_returns_the_tapped_options_value(agent, gateway, index, value, shown):
    future = ask(agent)
    card = posted_card(agent)
    assert card.card[0] == {"kind": "header", "text": "Release"}
    assert card.card[1] == {"kind": "text", "text": "Ship release 7 now?"}
    assert [b["label"] for b in buttons(card)] == ["Yes", "Ship it", "Wait"]
    assert not any(b.get("disabled") for b in buttons(card))
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = tap(http, card.thread_id, card.tool_call_id, index)
    assert response.status_code == 200 and response.json() == {"ok": True, "text": f"Answered: {shown}"}

    result = future.result(timeout=20)
    assert not result.is_error, text_of(result)
    assert text_of(result) == value

    card.refresh_from_db()
    pressed = buttons(card)
    assert [b["label"] for b in pressed] == [
        shown if i == index else b for i, b in enumerate(["Yes", "Ship it", "Wait"])
    ]
    assert all(b["disabled"] for b in pressed)
    assert [i for i, b in enumerate(pressed) if b.get("chosen")] == [index]
    assert notes(card) == ["Answered by owner"]
    question = Question.objects.get(tool_call_id=card.tool_call_id)
    assert (question.status, question.answer_index, question.answered_by.user.username) == ("answered", index, "owner")
    # The Block Kit rendering shows the decision too: no live buttons, the note.
    assert not any(block["type"] == "actions" for block in card.blocks)
    assert card.blocks[-1]["elements"][0]["text"] == "Answered by owner"


def test_a_second_tap_is_told_who_answered_and_changes_nothing(agent, gateway, plain_member):
    Member.objects.filter(id=plain_member.id).update(role=Member.Role.ADMIN)  # a workspace admin may answer
    future = ask(agent)
    card = posted_card(agent)
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        assert tap(http, card.thread_id, card.tool_call_id, 2).status_code == 200
    assert text_of(future.result(timeout=20)) == "Wait"
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = tap(http, card.thread_id, card.tool_call_id, 1)
    assert response.status_code == 409
    assert response.json() == {"ok": False, "text": "already answered by member: Wait"}
    question = Question.objects.get(tool_call_id=card.tool_call_id)
    assert (question.answer_index, question.answered_by_id) == (2, plain_member.id)


def test_a_plain_member_is_refused_inline_and_a_workspace_admin_answers(agent, gateway, plain_member):
    """The rule of approvals: the session's owner or a workspace owner or admin decides."""
    future = ask(agent)
    card = posted_card(agent)
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        response = tap(http, card.thread_id, card.tool_call_id, 1)
        assert response.status_code == 409
        assert response.json() == {"ok": False, "text": questions.WHO_MAY_ANSWER}
        assert Question.objects.get(tool_call_id=card.tool_call_id).status == "open" and not future.done()
        card.refresh_from_db()
        assert notes(card) == [] and not any(b.get("disabled") for b in buttons(card))  # the card still asks

        Member.objects.filter(id=plain_member.id).update(role=Member.Role.ADMIN)
        response = tap(http, card.thread_id, card.tool_call_id, 1)
    assert response.status_code == 200 and response.json()["text"] == "Answered: Shipped"
    assert text_of(future.result(timeout=20)) == "ship"
    assert Question.objects.get(tool_call_id=card.tool_call_id).answered_by_id == plain_member.id


def test_the_plain_member_who_started_the_session_answers_its_question(agent, gateway, plain_member):
    from sessions.models import Session

    Session.objects.filter(id=agent.session.id).update(owner=plain_member)
    future = ask(agent)
    card = posted_card(agent)
    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        assert tap(http, card.thread_id, card.tool_call_id, 0).status_code == 200
    assert text_of(future.result(timeout=20)) == "Yes"


def test_of_eight_concurrent_taps_exactly_one_wins(agent, gateway):
    future = ask(agent, options=[f"Option {i}" for i in range(8)])
    card = posted_card(agent)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        token = csrf_token_in(http.get(f"/threads/{card.thread_id}/").text)
        url = f"/threads/{card.thread_id}/actions/question/{card.tool_call_id}/"
        barrier = threading.Barrier(8)

        def press(i):
            barrier.wait()
            return http.post(url, data={"value": str(i)}, headers={"X-CSRFToken": token})

        with ThreadPoolExecutor(max_workers=8) as pool:
            responses = list(pool.map(press, range(8)))
    won = [i for i, r in enumerate(responses) if r.status_code == 200]
    assert len(won) == 1, [r.text for r in responses]
    assert all(
        r.status_code == 409 and "already answered by owner" in r.json()["text"] for r in responses if r.is_error
    )
    assert text_of(future.result(timeout=20)) == f"Option {won[0]}"
    assert Question.objects.get(tool_call_id=card.tool_call_id).answer_index == won[0]


def test_a_tap_from_another_workspace_is_refused_and_changes_nothing(agent, gateway, stranger):
    stranger_member, foreign_session = stranger
    future = ask(agent)
    card = posted_card(agent)
    with logged_in(gateway, "stranger", STRANGER_PASSWORD) as http:
        # On Acme's thread: not theirs to see.
        assert tap(http, card.thread_id, card.tool_call_id, 0).status_code == 404
        # Through their own thread, naming Acme's question: not in that thread.
        response = tap(http, foreign_session.thread_id, card.tool_call_id, 0)
        assert response.status_code == 409
        assert response.json()["text"] == "there is no such question in this thread"
    # The handler itself refuses a member of another workspace, whatever channel calls it.
    with pytest.raises(ActionRefused, match="only members of this thread's workspace"):
        questions.question_answer_pressed(
            thread=card.thread, member=stranger_member, target_id=card.tool_call_id, value="0", via="slack"
        )
    assert Question.objects.get(tool_call_id=card.tool_call_id).status == "open"
    assert not future.done()
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert tap(http, card.thread_id, card.tool_call_id, 1).status_code == 200
    assert text_of(future.result(timeout=20)) == "ship"


def test_a_value_that_is_no_option_is_refused(agent, gateway):
    future = ask(agent)
    card = posted_card(agent)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        for value in ("3", "-1", "Yes", ""):
            response = tap(http, card.thread_id, card.tool_call_id, value)
            assert response.status_code == 409 and "not one of the question's options" in response.json()["text"]
        assert tap(http, card.thread_id, card.tool_call_id, 0).status_code == 200
    assert text_of(future.result(timeout=20)) == "Yes"


def test_a_rolled_back_answer_wakes_nobody(agent, gateway, workspace):
    """The answer is pushed on commit: a press whose transaction rolls back is not an answer."""
    future = ask(agent)
    card = posted_card(agent)
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    with pytest.raises(RuntimeError), transaction.atomic():
        questions.question_answer_pressed(
            thread=card.thread, member=owner, target_id=card.tool_call_id, value="0", via="web"
        )
        raise RuntimeError("roll back")
    time.sleep(0.5)  # a push sent before the commit would have arrived by now
    assert not future.done()
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert tap(http, card.thread_id, card.tool_call_id, 2).status_code == 200
    assert text_of(future.result(timeout=20)) == "Wait"


def test_an_answer_given_before_the_call_listens_is_found(agent, gateway, workspace, monkeypatch):
    """Answered between recording the question and subscribing: the check after subscribing finds it."""
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    real_ask = questions.question_ask

    def ask_then_answer(**kwargs):
        asked = real_ask(**kwargs)
        press_in_service(asked["question_id"], owner, "1")
        return asked

    monkeypatch.setattr(questions, "question_ask", ask_then_answer)
    result = ask(agent, timeout=30).result(timeout=20)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "ship"


def test_an_answer_given_while_the_call_checks_the_database_wakes_it(agent, gateway, workspace, monkeypatch):
    """Answered just after the call found the question open: it is already subscribed, so the
    push wakes it at once (subscribing after the check would leave it asleep until its timeout)."""
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    real_decision = questions.question_decision

    def check_then_answer(*, question_id):
        decision = real_decision(question_id=question_id)
        press_in_service(question_id, owner, "2")
        return decision

    monkeypatch.setattr(questions, "question_decision", check_then_answer)
    result = ask(agent, timeout=60).result(timeout=15)  # far less than the timeout it would otherwise sleep
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Wait"


# ---------------------------------------------------------------- timing out


def test_a_question_nobody_answers_times_out_and_the_card_says_so(agent, gateway):
    future = ask(agent, timeout=1)
    card = posted_card(agent)
    result = future.result(timeout=20)
    assert result.is_error
    assert "the question timed out after 1 seconds without an answer" in text_of(result)
    question = Question.objects.get(tool_call_id=card.tool_call_id)
    assert question.status == "expired" and question.answered_by is None
    card = wait_for(lambda: Message.objects.filter(id=card.id, card__contains=[{"kind": "note"}]).first())
    assert notes(card) == ["Timed out after 1 seconds; nobody answered."]
    assert all(b["disabled"] and not b.get("chosen") for b in buttons(card))
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = tap(http, card.thread_id, card.tool_call_id, 0)
    assert response.status_code == 409
    assert response.json()["text"] == "this question is closed: the agent is no longer waiting for an answer"
    assert Question.objects.get(id=question.id).status == "expired"


def test_many_questions_timing_out_side_by_side_all_return(agent, gateway):
    """Timeouts end each wait without cancelling the channel layer's receive (a cancelled
    channels_redis receive was seen blocked for good in redis-py's read, with its call)."""
    for wave in range(3):
        futures = [ask(agent, title=f"Wave {wave} #{i}", options=["a", "b"], timeout=1) for i in range(16)]
        for future in futures:
            result = future.result(timeout=30)
            assert result.is_error and "timed out after 1 seconds" in text_of(result)
    assert Question.objects.filter(status="expired").count() == 48


def test_an_answer_landing_as_the_timeout_fires_is_returned(agent, gateway, workspace, monkeypatch):
    """The expiry is a compare-and-swap: when an answer won it first, the call returns that answer."""
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    real_expire = questions.question_expire

    def answer_then_expire(*, question_id, note):
        question = Question.objects.select_related("tool_call__session__thread").get(id=question_id)
        Question.objects.filter(id=question_id).update(
            expires_at=question.expires_at + (question.expires_at - question.tool_call.created_at)
        )
        press_in_service(question_id, owner, "2")
        return real_expire(question_id=question_id, note=note)

    monkeypatch.setattr(questions, "question_expire", answer_then_expire)
    result = ask(agent, timeout=1).result(timeout=20)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Wait"
    assert Question.objects.get(tool_call__session=agent.session).status == "answered"


def test_a_late_tap_on_a_question_nobody_waits_for_expires_it(agent, gateway, workspace):
    """A question past its deadline that no waiting call expired (its gateway went away) takes no answer."""
    future = ask(agent, timeout=30)
    card = posted_card(agent)
    question = Question.objects.get(tool_call_id=card.tool_call_id)
    Question.objects.filter(id=question.id).update(expires_at=question.tool_call.created_at)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = tap(http, card.thread_id, card.tool_call_id, 0)
    assert response.status_code == 409 and "this question is closed" in response.json()["text"]
    assert Question.objects.get(id=question.id).status == "expired"
    result = future.result(timeout=20)  # the push of the expiry wakes the call
    assert result.is_error and "timed out" in text_of(result)


def test_a_question_whose_caller_went_away_is_closed(agent, gateway):
    """The agent's request ends (its turn interrupted): the question closes at once, so nobody
    answers into the void, and the card says why."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "ask_user_question",
                "arguments": {"title": "Release", "question": "Ship?", "options": OPTIONS, "timeout": 600},
            },
        }
    )
    headers = {"authorization": f"Bearer {agent.token}", "accept": "application/json, text/event-stream"}
    with pytest.raises(httpx2.ReadTimeout):  # the client gives up and closes its connection
        httpx2.post(
            agent.nanoclaw.url, content=body, headers={**headers, "content-type": "application/json"}, timeout=3
        )
    card = posted_card(agent)
    wait_for(lambda: Question.objects.get(tool_call_id=card.tool_call_id).status == "expired", timeout=10)
    card = wait_for(lambda: Message.objects.filter(id=card.id, card__contains=[{"kind": "note"}]).first())
    assert notes(card) == ["Closed: the agent stopped waiting for an answer."]
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        response = tap(http, card.thread_id, card.tool_call_id, 0)
    assert response.status_code == 409 and "this question is closed" in response.json()["text"]


# ---------------------------------------------------------------- waiting


def test_forty_waiting_questions_hold_no_threads_and_poll_nothing(agent, gateway, monkeypatch):
    """More questions wait at once than the server has threads in its pool, and while they
    wait nothing reads the questions table; then each tap returns its own call's value."""
    threads_before = threading.active_count()
    futures = [ask(agent, title=f"Question {i}", options=[f"a{i}", f"b{i}"], timeout=60) for i in range(40)]
    wait_for(lambda: Question.objects.filter(tool_call__session=agent.session).count() == 40, timeout=30)
    wait_for(lambda: Message.objects.filter(thread=agent.session.thread, kind="card").count() == 40, timeout=30)

    reads = []
    original = CursorWrapper.execute

    def counting(self, sql, params=None):
        if Question._meta.db_table in sql:
            reads.append(sql)
        return original(self, sql, params)

    time.sleep(0.5)  # let the last calls reach their wait
    monkeypatch.setattr(CursorWrapper, "execute", counting)
    time.sleep(2.5)  # NanoClaw polls every second: a poller would have read at least twice per question
    monkeypatch.undo()
    assert reads == []
    assert not any(f.done() for f in futures)
    # 40 background client threads of this test, plus the server's pooled threads (at most 32).
    assert threading.active_count() < threads_before + 40 + 32

    cards = Message.objects.filter(thread=agent.session.thread, kind="card").select_related("tool_call")
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        for card in cards:
            i = int(card.tool_call.arguments["title"].split()[-1])
            assert tap(http, card.thread_id, card.tool_call_id, i % 2).status_code == 200
    values = [text_of(f.result(timeout=30)) for f in futures]
    assert values == [f"{'ab'[i % 2]}{i}" for i in range(40)]


# ---------------------------------------------------------------- refusals


def refused(agent, arguments: dict, *expected: str) -> str:
    result = agent.nanoclaw.call(
        "ask_user_question", {"title": "T", "question": "Q?", "options": ["a", "b"], **arguments}
    )
    text = text_of(result)
    assert result.is_error, text
    assert text.startswith("Error executing tool ask_user_question: invalid question: "), text
    for piece in expected:
        assert piece in text, f"{piece!r} not in {text!r}"
    assert not ToolCall.objects.filter(session=agent.session).exists(), "a refused question leaves no row"
    assert not Question.objects.exists()
    return text


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param([], ["options: give at least one option"], id="empty"),
        pytest.param([f"o{i}" for i in range(26)], ["options: at most 25 options (got 26)"], id="26-options"),
        pytest.param(
            ["Yes", {"label": "Yes", "value": "y"}],
            ["options[1]: the label 'Yes' is also options[0]'s (labels must be unique)"],
            id="duplicate-labels",
        ),
        pytest.param(
            [1, None, ["a"], True],
            [
                "options[0]: must be a string or an object {label, selectedLabel?, value?} (got number)",
                "options[1]: must be a string or an object {label, selectedLabel?, value?} (got null)",
                "options[2]: must be a string or an object {label, selectedLabel?, value?} (got array)",
                "options[3]: must be a string or an object {label, selectedLabel?, value?} (got boolean)",
            ],
            id="wrong-types",
        ),
        pytest.param([{"value": "x"}], ["options[0].label: required"], id="object-without-label"),
        pytest.param(
            [{"label": 5}, {"label": "ok", "value": 7}, {"label": "b", "selectedLabel": ""}],
            [
                "options[0].label: must be a string (got number)",
                "options[1].value: must be a string (got number)",
                "options[2].selectedLabel: must not be empty",
            ],
            id="wrong-property-types",
        ),
        pytest.param(
            ["x" * 76, {"label": "y", "selectedLabel": "z" * 76}, {"label": "w", "value": "v" * 2001}],
            [
                "options[0]: at most 75 characters (got 76)",
                "options[1].selectedLabel: at most 75 characters (got 76)",
                "options[2].value: at most 2000 characters (got 2001)",
            ],
            id="too-long",
        ),
        pytest.param(["  "], ["options[0]: must not be empty"], id="blank-label"),
        pytest.param(
            [{"label": "a", "selected_label": "b"}],
            ["options[0]: unknown properties 'selected_label' (an option has label, selectedLabel and value)"],
            id="unknown-property",
        ),
        pytest.param("Yes or no", ["options: must be a list of strings or"], id="not-a-list"),
    ],
)
def test_bad_option_lists_are_refused(agent, options, expected):
    refused(agent, {"options": options}, *expected)


@pytest.mark.parametrize(
    ("timeout", "expected"),
    [
        (0, "timeout: must be between 1 and 3600 seconds (got 0)"),
        (3601, "timeout: must be between 1 and 3600 seconds (got 3601)"),
        (-5, "timeout: must be between 1 and 3600 seconds (got -5)"),
        (0.5, "timeout: must be between 1 and 3600 seconds (got 0.5)"),
        (True, "timeout: must be a number of seconds (got boolean)"),
        ("300", "timeout: must be a number of seconds (got string)"),
        ([60], "timeout: must be a number of seconds (got array)"),
        (None, "timeout: must be a number of seconds (got null; leave it out for the default 300)"),
    ],
)
def test_a_timeout_out_of_range_or_not_a_number_is_refused(agent, timeout, expected):
    refused(agent, {"timeout": timeout}, expected)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_timeout_is_refused(agent, value):
    arguments = '{"title": "T", "question": "Q?", "options": ["a", "b"], "timeout": ' + value + "}"
    result = agent.nanoclaw.raw_call("ask_user_question", arguments)
    assert result["isError"]
    assert "timeout: must be a finite number of seconds (not NaN or Infinity)" in result["content"][0]["text"]
    assert not Question.objects.exists()


def test_every_problem_is_listed_in_one_refusal(agent):
    text = refused(
        agent,
        {"title": "t" * 151, "question": "", "options": ["a", "a", 3], "timeout": 0},
        "title: at most 150 characters (got 151)",
        "question: must not be empty",
        "options[1]: the label 'a' is also options[0]'s",
        "options[2]: must be a string or an object",
        "timeout: must be between 1 and 3600 seconds (got 0)",
    )
    assert text.count(";") == 4


def test_bounds_are_inclusive(agent, gateway):
    """One option, 75-character labels, a 150-character title and 3000-character question are fine."""
    label = "L" * 75
    future = ask(agent, title="T" * 150, question="Q" * 3000, options=[{"label": label, "value": "v" * 2000}])
    card = posted_card(agent)
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert tap(http, card.thread_id, card.tool_call_id, 0).status_code == 200
    assert text_of(future.result(timeout=20)) == "v" * 2000


def test_a_question_containing_a_secret_is_refused(agent, settings):
    settings.SP_STORE_KEY = [new_key()]
    secret_set(session=agent.session, name="DEPLOY_TOKEN", value="tok-5ecret-99")
    for arguments in (
        {"title": "tok-5ecret-99"},
        {"question": "Use tok-5ecret-99?"},
        {"options": ["a", {"label": "b", "value": "tok-5ecret-99"}]},
    ):
        result = agent.nanoclaw.call(
            "ask_user_question", {"title": "T", "question": "Q?", "options": ["a"], **arguments}
        )
        text = text_of(result)
        assert result.is_error and "the question contains the value of the secret" in text, text
        assert "tok-5ecret-99" not in text
    assert not ToolCall.objects.filter(session=agent.session).exists()


def test_the_stored_call_keeps_the_question_as_asked(agent, gateway):
    future = ask(agent, timeout=30)
    card = posted_card(agent)
    call = ToolCall.objects.get(id=card.tool_call_id)
    assert (call.server, call.tool) == ("nanoclaw", "ask_user_question")
    assert call.arguments == {
        "title": "Release",
        "question": "Ship release 7 now?",
        "options": OPTIONS,
        "timeout": 30.0,
    }
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert tap(http, card.thread_id, card.tool_call_id, 1).status_code == 200
    assert text_of(future.result(timeout=20)) == "ship"
    call.refresh_from_db()
    assert call.result == {"status": "answered", "value": "ship", "by": "owner", "via": "web"}
    assert json.dumps(call.payload["blocks"])  # what Slack would get is stored with it


def test_the_sweep_closes_a_question_whose_waiting_call_is_gone(agent, gateway):
    """A gateway that stopped leaves its questions open: the beat sweep closes those well past their deadline."""
    from datetime import timedelta

    from django.utils import timezone

    from tools.services.questions import OVERDUE_GRACE
    from tools.tasks import sweep_tool_calls

    future = ask(agent, timeout=30)
    card = posted_card(agent)
    question = Question.objects.get(tool_call_id=card.tool_call_id)
    just_due = timezone.now() - OVERDUE_GRACE + timedelta(seconds=5)
    Question.objects.filter(id=question.id).update(expires_at=just_due)
    sweep_tool_calls()
    assert Question.objects.get(id=question.id).status == "open"  # within the grace: its caller may still close it
    Question.objects.filter(id=question.id).update(expires_at=just_due - timedelta(seconds=10))
    sweep_tool_calls()
    assert Question.objects.get(id=question.id).status == "expired"
    result = future.result(timeout=20)
    assert result.is_error and "timed out" in text_of(result)
    wait_for(lambda: "gateway restarted" in str(Message.objects.get(id=card.id).card))
