"""Which host runs which turn: claims that hold however many hosts and web processes ask.

A host's consumer claims for its own host only, when it registers, heartbeats, finishes a
turn, or is woken because a turn was queued. A claim locks candidate sessions with
SKIP LOCKED, so two hosts never take the same session, and takes every queued turn of the
session at once, in order: messages that arrived during a turn reach the next one together.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, F, Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from calvin.workspaces.models import Agent, Quota
from sessions.changes import host_changed, session_changed, turns_changed
from sessions.hosts import host_is_live
from sessions.models import Host, Message, Runner, Session, Turn

TELL_BATCH = 100


# Hosts woken for one session's queued turn: two, so that one which filled up meanwhile does not
# leave the turn to the next heartbeat.
WAKE_AT_MOST = 2


def hosts_wake_on_commit(*, session_id: int | None = None) -> None:
    """After the commit that made work, tell hosts' consumers to claim: for one session's turn
    only the hosts that may take it (hosts_to_wake); for anything wider, every connected host.

    Waking every host for each turn made each of their consumers run a claim (four statements)
    for a turn only one could take: with 200 hosts, 800 statements a turn (bench/gateway_scale.py)."""

    def wake():
        from sessions.host_link import host_channels_wake, hosts_wake

        if session_id is None:
            hosts_wake()
        else:
            host_channels_wake(hosts_to_wake(session_id=session_id))

    transaction.on_commit(wake)


def hosts_to_wake(*, session_id: int) -> list[str]:
    """The connections to wake for a session's queued turn: its own host's while that host
    lives (no other may take the session then); else those of the least loaded live hosts with
    room that serve its workspace, at most WAKE_AT_MOST. None with room: a host that finishes a
    turn claims, and every heartbeat does."""
    session = Session.objects.filter(id=session_id).values("host_id", "workspace_id").first()
    if session is None:
        return []
    cutoff = timezone.now() - timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS)
    live = Host.objects.filter(revoked_at__isnull=True, last_heartbeat_at__gte=cutoff)
    if session["host_id"]:
        own = live.filter(id=session["host_id"]).values_list("channel_name", flat=True).first()
        if own is not None:
            return [own] if own else []  # connected or not, the session is that host's
    running = (
        Turn.objects.filter(host=OuterRef("pk"), status=Turn.Status.RUNNING)
        .values("host")
        .annotate(sessions=Count("session", distinct=True))
        .values("sessions")
    )
    room = (
        live.exclude(channel_name="")
        .filter(Q(workspace__isnull=True) | Q(workspace_id=session["workspace_id"]))
        .annotate(running=Coalesce(Subquery(running), 0))
        .filter(capacity__gt=F("running"))
        .order_by("running", "?")
    )
    return list(room.values_list("channel_name", flat=True)[:WAKE_AT_MOST])


def _running_sessions(**filters) -> int:
    return Turn.objects.filter(status=Turn.Status.RUNNING, **filters).values("session_id").distinct().count()


def _host_gone() -> Q:
    """A session's host that no longer lives (its heartbeat lapsed; revoking clears it too):
    the session is not its own any more, or an idle session would wait for it forever. Here
    it starts a new runner generation (runner_start revokes the old host's)."""
    cutoff = timezone.now() - timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS)
    return Q(host__last_heartbeat_at__isnull=True) | Q(host__last_heartbeat_at__lt=cutoff)


def _candidates(host: Host, limit: int) -> list[Session]:
    queued = Turn.objects.filter(session=OuterRef("pk"), status=Turn.Status.QUEUED)
    running = Turn.objects.filter(session=OuterRef("pk"), status=Turn.Status.RUNNING)
    sessions = (
        Session.objects.annotate(first_queued=Subquery(queued.order_by("id").values("id")[:1]))
        .filter(Exists(queued), ~Exists(running))
        .filter(Q(host__isnull=True) | Q(host=host) | _host_gone())
        .exclude(agent__provider=Agent.Provider.EXTERNAL)  # a person runs that agent, not a host
        .exclude(agent__paused_at__isnull=False)  # paused: its turns wait (_tell_paused says so)
    )
    if host.workspace_id:
        sessions = sessions.filter(workspace_id=host.workspace_id)
    # The longest waiting first; rows another claimer holds are skipped, not waited for.
    return list(sessions.select_for_update(skip_locked=True, of=("self",)).order_by("first_queued")[:limit])


@transaction.atomic
def turns_claim(*, host_id: int) -> list[dict]:
    """Claim queued work for one host: the turn messages to send it (empty when none)."""
    host = Host.objects.select_for_update().filter(id=host_id).first()  # one claim per host at a time
    if host is None or not host_is_live(host):  # deleted while its connection was still open
        return []
    free = host.capacity - _running_sessions(host_id=host_id)
    if free <= 0:
        return []
    claimed = []
    for session in _candidates(host, free):
        turn = _claim_session(host, session)
        if turn is not None:
            claimed.append(turn)
    _tell_paused(host)
    return claimed


def _tell_paused(host: Host) -> None:
    """Threads whose agent is paused and whose first queued turn was not told so yet are told
    once, who paused it (the claim that skips them runs on every heartbeat)."""
    from calvin.workspaces.pauses import paused_text

    waiting = Turn.objects.filter(status=Turn.Status.QUEUED, session__agent__paused_at__isnull=False)
    if host.workspace_id:
        waiting = waiting.filter(session__workspace_id=host.workspace_id)
    firsts = waiting.values("session_id").annotate(first=Min("id")).values_list("first", flat=True)
    for turn in Turn.objects.filter(id__in=firsts).select_related("session__agent__paused_by")[:TELL_BATCH]:
        agent = turn.session.agent
        who = agent.paused_by.get_username() if agent.paused_by else "an operator"
        _tell_once(turn.session, turn, paused_text(who))


def _claim_session(host: Host, session: Session) -> dict | None:
    from calvin.workspaces.quotas import quota_concurrent_refusal, quota_turn_take

    turns = list(session.turns.filter(status=Turn.Status.QUEUED).order_by("id"))
    # Looked at again now that the session's row is held: agent_pause waits for held rows, so a
    # pause committed after the candidates were read is seen here.
    if session.agent_id and Agent.objects.filter(id=session.agent_id, paused_at__isnull=False).exists():
        return None
    # Claims for one workspace take turns here, so two hosts cannot both start its last free session.
    Quota.objects.select_for_update().filter(workspace_id=session.workspace_id).first()
    waiting = quota_concurrent_refusal(
        workspace_id=session.workspace_id, running=_running_sessions(session__workspace_id=session.workspace_id)
    )
    if waiting:
        _tell_once(session, turns[0], waiting)
        return None
    admission = _spend_admission(session)
    if admission.wait:
        _tell_once(session, turns[0], admission.wait)
        return None
    if admission.refusal:
        _fail(session, turns, admission.refusal)
        return None
    refused = quota_turn_take(workspace_id=session.workspace_id)
    if refused:
        _fail(session, turns, refused)
        return None
    first = turns[0]
    if first.error.startswith(HOST_WAIT):  # the thread was told it waits for a host: now it has one
        from sessions.services import system_notice_post

        system_notice_post(thread_id=session.thread_id, text=HOST_TOOK)
    runner, token = _runner_for(session, host)
    now = timezone.now()
    Turn.objects.filter(id__in=[t.id for t in turns]).update(
        status=Turn.Status.RUNNING,
        host=host,
        runner=runner,
        batch=first,
        started_at=now,
        error="",
        attempts=F("attempts") + 1,
        budget_usd=admission.budget,
    )
    Session.objects.filter(id=session.id).update(host=host, status=Session.Status.RUNNING, updated_at=now)
    turns_changed(session, [t.id for t in turns], Turn.Status.RUNNING)
    session_changed(session, Session.Status.RUNNING)
    host_changed(host.id, "load", workspace_id=host.workspace_id)
    from sessions.turn_messages import turn_message

    message = turn_message(session=session, turns=turns, runner=runner, token=token)
    if admission.budget is not None:
        message["provider"]["max_budget_usd"] = str(admission.budget)  # Claude Code's --max-budget-usd
    return message


def _spend_admission(session: Session):
    """The spend caps' word on one more turn of this session (calvin/workspaces/spend.py says
    why concurrent turns cannot overshoot the monthly cap). Runs under the workspace's Quota
    row, held by _claim_session, so admissions of one workspace see each other's budgets."""
    from django.db.models import DecimalField, ExpressionWrapper, Sum, Value
    from django.db.models.functions import Coalesce, Greatest

    from calvin.workspaces.quotas import quota_concurrent_sessions
    from calvin.workspaces.spend import Admission, spend_admission, spend_caps
    from sessions.usage import session_spent_usd

    if spend_caps(workspace_id=session.workspace_id) == (None, None):
        return Admission()
    running = Turn.objects.filter(
        session__workspace_id=session.workspace_id, status=Turn.Status.RUNNING, batch_id=F("id")
    )
    money = DecimalField(max_digits=14, decimal_places=6)
    left = ExpressionWrapper(
        Coalesce("budget_usd", Value(0), output_field=money) - Coalesce("cost_usd", Value(0), output_field=money),
        output_field=money,
    )
    reserved = running.aggregate(total=Sum(Greatest(left, Value(0), output_field=money)))["total"] or 0
    claude = Agent.Provider.CLAUDE_CODE
    free = quota_concurrent_sessions(workspace_id=session.workspace_id) - running.count()
    return spend_admission(
        workspace_id=session.workspace_id,
        session_spent=session_spent_usd(session_id=session.id),
        reserved=reserved,
        free_slots=free,
        budgeted=session.agent is None or session.agent.provider == claude,
        unbudgeted_running=running.exclude(session__agent__provider=claude)
        .exclude(session__agent__isnull=True)
        .count(),
    )


def _runner_for(session: Session, host: Host) -> tuple[Runner, str | None]:
    """The session's runner on this host, or a new generation (with its token) when it has none."""
    from sessions.services import runner_start

    current = session.runners.filter(revoked_at__isnull=True, host=host).order_by("-generation").first()
    if current is not None:
        return current, None
    return runner_start(session=session, host=host)


def _tell_once(session: Session, turn: Turn, text: str) -> None:
    """Say why a turn waits, once per turn (claims are retried on every heartbeat, by every
    host: only the claim whose update changed the row tells)."""
    if turn.error == text or not Turn.objects.filter(id=turn.id).exclude(error=text).update(error=text):
        return
    from sessions.services import system_notice_post

    system_notice_post(thread_id=session.thread_id, text=f"Waiting: {text}")


HOST_WAIT = "Waiting for a host"
NO_HOST = f"{HOST_WAIT}: none is connected that can run this agent. The turn starts when one connects."
HOST_TOOK = "A host took the turn: the agent is working on it now."


def host_wait_text(reason: str) -> str:
    return f"{HOST_WAIT}: {reason}. The turn runs again when another host takes it."


def turn_host_wait_tell(*, turn_id: int, thread_id: int, text: str) -> bool:
    """The thread is told its turn waits for a host, once per wait (the turn's `error` holds what
    was told; only the update that changed it posts); HOST_TOOK follows when a host claims it."""
    if not Turn.objects.filter(id=turn_id, status=Turn.Status.QUEUED).exclude(error=text).update(error=text):
        return False
    from sessions.services import system_notice_post

    system_notice_post(thread_id=thread_id, text=text)
    return True


def turns_without_host_tell(*, now=None) -> int:
    """Sessions whose first queued turn has waited CALVIN_HOST_WAIT_NOTICE_SECONDS with no live
    host that may run it (none connected, or only other workspaces' hosts) are told so once."""
    now = now or timezone.now()
    lapse = now - timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS)
    live = Host.objects.filter(revoked_at__isnull=True, last_heartbeat_at__gte=lapse).exclude(channel_name="")
    if live.filter(workspace__isnull=True).exists():
        return 0  # a host that serves every workspace is connected: the turns wait for room, not a host
    served = live.values("workspace_id")
    waiting = (
        Turn.objects.filter(status=Turn.Status.QUEUED, error="")
        .filter(created_at__lt=now - timedelta(seconds=settings.CALVIN_HOST_WAIT_NOTICE_SECONDS))
        .exclude(session__workspace_id__in=served)
        .exclude(session__agent__provider=Agent.Provider.EXTERNAL)
        .exclude(session__agent__paused_at__isnull=False)  # _tell_paused says why those wait
    )
    firsts = waiting.values("session_id").annotate(first=Min("id")).values_list("first", flat=True)
    told = 0
    for turn_id, thread_id in Turn.objects.filter(id__in=firsts).values_list("id", "session__thread_id")[:TELL_BATCH]:
        told += turn_host_wait_tell(turn_id=turn_id, thread_id=thread_id, text=NO_HOST)
    return told


def _fail(session: Session, turns: list[Turn], text: str) -> None:
    Turn.objects.filter(id__in=[t.id for t in turns]).update(
        status=Turn.Status.FAILED, error=text, finished_at=timezone.now()
    )
    Session.objects.filter(id=session.id).update(status=Session.Status.IDLE)
    turns_changed(session, [t.id for t in turns], Turn.Status.FAILED)
    session_changed(session, Session.Status.IDLE)
    from sessions.services import system_notice_post

    system_notice_post(thread_id=session.thread_id, text=f"Not run: {text}")


def turn_prompt(turns: list[Turn]) -> str:
    """The batch's messages, in the order they arrived."""
    messages = Message.objects.filter(id__in=[t.prompt_id for t in turns if t.prompt_id]).select_related(
        "member", "sender_agent"
    )
    parts = []
    for message in sorted(messages, key=lambda m: m.id):
        if message.author == Message.Author.SYSTEM:
            parts.append(f"[system] {message.text}")
        elif message.sender_agent_id:
            parts.append(f"[from agent {message.sender_agent.name}] {message.text}")
        else:
            parts.append(message.text)
    return "\n\n".join(parts)
