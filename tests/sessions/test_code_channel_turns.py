"""Which turns carry a code channel's checkout to their runner: the first turn of a session in a
bound channel, and later ones only until a checkout succeeded; the request is checkout_repo's own;
nothing of another workspace's bindings applies, and a mode without checkout_repo asks nothing."""

import pytest
from django.utils import timezone

from calvin.workspaces.models import CodeChannel, Member, Repository
from calvin.workspaces.services import workspace_create
from sessions.code_channel_checkouts import MARK, code_channel_checkout_for_turn
from sessions.models import Turn
from sessions.services import message_post_by_person, runner_start, session_start
from sessions.turn_messages import turn_message
from tools.caller import caller_for_token
from tools.models import ToolCall
from tools.services.checkouts import checkout_plan

pytestmark = pytest.mark.django_db


@pytest.fixture
def web(workspace):
    return Repository.objects.create(
        workspace=workspace, name="web", full_name="acme/web", clone_url="https://example.com/acme/web.git"
    )


@pytest.fixture
def bound(workspace, web):
    CodeChannel.objects.create(workspace=workspace, kind="slack", channel="C0CODE001", repository=web)
    return CodeChannel.objects.create(workspace=workspace, kind="web", channel="web", repository=web)


def started(workspace, channel_kind="web", channel_id="space:web", prompt="fix it"):
    owner = Member.objects.filter(workspace=workspace).first()
    return session_start(
        workspace=workspace, owner=owner, prompt=prompt, channel_kind=channel_kind, channel_id=channel_id
    )


def batch(session) -> list[Turn]:
    """The session's queued turns, claimed as a host's claim marks them."""
    turns = list(session.turns.filter(status=Turn.Status.QUEUED).order_by("id"))
    Turn.objects.filter(id__in=[t.id for t in turns]).update(status=Turn.Status.RUNNING, started_at=timezone.now())
    return turns


def ran(session, turns, *, checked_out: str | None = None, binding=None) -> None:
    """The batch ended; `checked_out` "applied" or "failed" records its code channel checkout."""
    Turn.objects.filter(id__in=[t.id for t in turns]).update(status=Turn.Status.DONE)
    if checked_out:
        ToolCall.objects.create(
            session=session,
            tool="checkout_repo",
            status=checked_out,
            payload={MARK: binding.id, "turn": turns[0].id},
        )


def test_the_first_turn_carries_checkout_repos_own_request(workspace, web, bound):
    session = started(workspace)
    runner, token = runner_start(session=session)
    turns = batch(session)
    message = turn_message(session=session, turns=turns, runner=runner, token=token)
    spec = message["checkout"]
    assert spec["code_channel"] == bound.id and spec["label"] == "#web"
    assert (spec["repository"], spec["name"]) == ("acme/web", "web")
    # The same request checkout_repo sends to the host for this session (tools/services/checkouts.py).
    assert spec["request"] == checkout_plan(caller=caller_for_token(token), repos=["web"])["request"]
    assert spec["request"]["branch"] == f"calvin/session-{session.id}"


def test_a_slack_thread_in_a_bound_channel_carries_it_too_and_an_unbound_one_not(workspace, bound):
    session = started(workspace, "slack", "C0CODE001")
    assert code_channel_checkout_for_turn(session=session, turns=batch(session))
    for kind, channel in (("slack", "C0OTHER01"), ("slack", "D0CODE001"), ("web", "web"), ("web", "space:other")):
        session = started(workspace, kind, channel)
        assert code_channel_checkout_for_turn(session=session, turns=batch(session)) is None, channel


def test_later_turns_carry_it_only_until_a_checkout_succeeded(workspace, bound):
    session = started(workspace)
    first = batch(session)
    assert code_channel_checkout_for_turn(session=session, turns=first)
    ran(session, first, checked_out=ToolCall.Status.FAILED, binding=bound)
    message_post_by_person(thread=session.thread, member=session.owner, text="again")
    second = batch(session)
    assert code_channel_checkout_for_turn(session=session, turns=second)  # it failed: tried again
    ran(session, second, checked_out=ToolCall.Status.APPLIED, binding=bound)
    message_post_by_person(thread=session.thread, member=session.owner, text="and again")
    assert code_channel_checkout_for_turn(session=session, turns=batch(session)) is None


def test_a_turn_that_runs_again_on_another_host_carries_it_again(workspace, bound):
    session = started(workspace)
    turns = batch(session)
    Turn.objects.filter(id__in=[t.id for t in turns]).update(status=Turn.Status.QUEUED)  # its host was lost
    assert code_channel_checkout_for_turn(session=session, turns=batch(session))


def test_a_session_that_ran_before_its_channel_was_bound_is_left_alone(workspace, web):
    session = started(workspace, "slack", "C0LATER01")
    ran(session, batch(session))
    CodeChannel.objects.create(workspace=workspace, kind="slack", channel="C0LATER01", repository=web)
    message_post_by_person(thread=session.thread, member=session.owner, text="now")
    assert code_channel_checkout_for_turn(session=session, turns=batch(session)) is None


def test_an_unpublished_repository_is_refused_by_the_gateway_with_the_seeds_words(workspace, web, bound):
    Repository.objects.filter(id=web.id).update(published=False)
    session = started(workspace)
    spec = code_channel_checkout_for_turn(session=session, turns=batch(session))
    assert spec["error"] == "acme/web is not published yet" and "request" not in spec


def test_another_workspaces_binding_never_applies(workspace, bound, django_user_model):
    user = django_user_model.objects.create_user("globex-owner", password="pw-globex-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    for kind, channel in (("web", "space:web"), ("slack", "C0CODE001")):
        session = started(globex, kind, channel)
        assert code_channel_checkout_for_turn(session=session, turns=batch(session)) is None


def test_a_mode_without_checkout_repo_checks_nothing_out(workspace, bound, settings):
    settings.CALVIN_MODE = "one-machine"
    session = started(workspace)
    assert code_channel_checkout_for_turn(session=session, turns=batch(session)) is None
