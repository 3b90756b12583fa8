"""Reads of one workspace's pages: each scoped to the workspace the person's membership names."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Case, CharField, Count, Exists, OuterRef, Q, Sum, Value, When
from django.utils import timezone

from approvals.models import PendingApproval
from calvin.chat.models import SlackInstallation
from calvin.workspaces.models import Agent, DailyUsage, Member, Quota, StorageUsage
from calvin.workspaces.quotas import month_bounds, quota_usage, utc_today
from secrets_vault.models import SecretRequest
from sessions.models import Host, Message, Session, Thread
from tools.models import Question, ToolCall

# The home page's states, in the order its tabs show them. "waiting" is a person's turn: an
# approval, a question or a secret request of the session is pending, whatever its status says.
# "agent": an external agent's session with messages for it: Calvin runs nothing for it, so it
# is never "queued" (no host would claim it); it waits for the agent its person runs.
STATES = ("running", "waiting", "agent", "queued", "idle", "stopped")
SESSIONS_PER_PAGE = 25
MAX_SEARCH = 200


def threads_of(workspace, limit: int = 50):
    return Thread.objects.filter(workspace=workspace).select_related("session").order_by("-created_at")[:limit]


def tool_calls_of(workspace, limit: int = 20):
    return (
        ToolCall.objects.filter(session__workspace=workspace).select_related("session__thread").order_by("-id")[:limit]
    )


def slack_installation_of(workspace) -> SlackInstallation | None:
    return SlackInstallation.objects.filter(workspace=workspace).select_related("installed_by").first()


# -- Sessions by state


def _waiting_for_a_person(now):
    session = OuterRef("pk")
    return (
        Exists(PendingApproval.objects.filter(session=session, status="pending", expires_at__gt=now))
        | Exists(Question.objects.filter(tool_call__session=session, status="open", expires_at__gt=now))
        | Exists(SecretRequest.objects.filter(session=session, status="waiting"))
    )


def sessions_with_state(workspace, *, now=None):
    """The workspace's sessions, each annotated with `state` (one of STATES), in the database."""
    now = now or timezone.now()
    return (
        Session.objects.filter(workspace=workspace)
        .annotate(
            state=Case(
                When(status__in=("finished", "failed"), then=Value("stopped")),
                When(_waiting_for_a_person(now), then=Value("waiting")),
                When(status="running", then=Value("running")),
                When(status="queued", agent__provider=Agent.Provider.EXTERNAL, then=Value("agent")),
                When(status="idle", then=Value("idle")),
                default=Value("queued"),
                output_field=CharField(),
            )
        )
        .select_related("thread", "agent", "owner__user", "host")
    )


def session_state_counts(workspace, *, now=None) -> dict[str, int]:
    rows = sessions_with_state(workspace, now=now).order_by().values("state").annotate(n=Count("id"))
    counts = dict.fromkeys(STATES, 0) | {row["state"]: row["n"] for row in rows}
    counts["all"] = sum(counts[state] for state in STATES)
    return counts


@dataclass(frozen=True)
class SessionFilters:
    """What the filter form asked for, each part checked; anything unknown reads as "any"."""

    state: str = ""
    agent: int | None = None
    person: int | None = None
    q: str = ""

    @classmethod
    def from_query(cls, query, workspace) -> "SessionFilters":
        def own_id(name, model):
            raw = query.get(name, "")
            if not raw.isdecimal() or len(raw) > 18:
                return None
            return int(raw) if model.objects.filter(workspace=workspace, id=int(raw)).exists() else None

        state = query.get("state", "")
        return cls(
            state=state if state in STATES else "",
            agent=own_id("agent", Agent),
            person=own_id("person", Member),
            q=query.get("q", "").strip()[:MAX_SEARCH],
        )

    def as_query(self) -> dict:
        return {
            k: v for k, v in (("state", self.state), ("agent", self.agent), ("person", self.person), ("q", self.q)) if v
        }


def sessions_page(workspace, filters: SessionFilters, page: str | int | None, *, now=None):
    """One page of the workspace's sessions matching `filters`, newest first (every session, not
    the latest few). The search reads the thread's title, the agent's name and what was written
    in the thread."""
    sessions = sessions_with_state(workspace, now=now)
    if filters.state:
        sessions = sessions.filter(state=filters.state)
    if filters.agent:
        sessions = sessions.filter(agent_id=filters.agent)
    if filters.person:
        sessions = sessions.filter(owner_id=filters.person)
    if filters.q:
        written = Message.objects.filter(thread_id=OuterRef("thread_id"), text__icontains=filters.q)
        sessions = sessions.filter(
            Q(thread__title__icontains=filters.q) | Q(agent__name__icontains=filters.q) | Exists(written)
        )
    paginator = Paginator(sessions.order_by("-created_at", "-id"), SESSIONS_PER_PAGE)
    return paginator.get_page(page)


def filter_choices(workspace) -> dict:
    return {
        "agents": Agent.objects.filter(workspace=workspace).order_by("name").only("id", "name"),
        "people": Member.objects.filter(workspace=workspace).select_related("user").order_by("display_name", "id"),
    }


# -- What waits for a person


def pending_approvals_of(workspace, *, now=None):
    now = now or timezone.now()
    return (
        PendingApproval.objects.filter(session__workspace=workspace, status="pending", expires_at__gt=now)
        .select_related("session__thread", "session__owner__user", "session__workspace")
        .order_by("requested_at", "id")
    )


def open_questions_of(workspace, *, now=None):
    now = now or timezone.now()
    return (
        Question.objects.filter(tool_call__session__workspace=workspace, status="open", expires_at__gt=now)
        .select_related("tool_call__session__thread", "tool_call__session__owner__user")
        .order_by("tool_call__created_at", "tool_call_id")
    )


def waiting_secret_requests_of(workspace):
    return (
        SecretRequest.objects.filter(session__workspace=workspace, status="waiting")
        .select_related("session__thread")
        .order_by("requested_at")
    )


# -- Hosts


def hosts_of(workspace, *, now=None) -> list[dict]:
    """Hosts that may run this workspace's sessions (its own and the shared ones), with their
    health and load. A shared host's load counts only this workspace's sessions: other tenants'
    work on it is theirs to see."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS)
    hosts = (
        Host.objects.filter(Q(workspace=workspace) | Q(workspace__isnull=True), revoked_at__isnull=True)
        .annotate(running=Count("sessions", filter=Q(sessions__status="running", sessions__workspace=workspace)))
        .order_by("name")
    )
    rows = []
    for host in hosts:
        if not host.channel_name:
            health = "disconnected"
        elif host.last_heartbeat_at is None or host.last_heartbeat_at < cutoff:
            health = "late"  # its turns go to another host once the lapse passes
        else:
            health = "connected"
        rows.append({"host": host, "health": health, "running": host.running, "shared": host.workspace_id is None})
    return rows


# -- Today's use against each quota


def _month_spend(workspace, today) -> float:
    """The month's spend as the spend cap counts it (DailyUsage.cost_usd, P4's)."""
    first, following = month_bounds(today)
    rows = DailyUsage.objects.filter(workspace=workspace, day__gte=first, day__lt=following)
    return float(rows.aggregate(total=Sum("cost_usd"))["total"] or 0)


def _stored_bytes(workspace) -> int:
    """Bytes stored as the storage quota counts them (StorageUsage, P4's)."""
    return StorageUsage.objects.filter(workspace=workspace).values_list("bytes", flat=True).first() or 0


def _meter(key: str, label: str, used, limit, *, unit: str = "", resets: str = "") -> dict:
    percent = None if not limit else min(100, round(float(used) / float(limit) * 100))
    return {
        "key": key,
        "label": label,
        "used": used,
        "limit": limit,
        "unit": unit,
        "percent": percent,
        "resets": resets,
    }


def usage_meters(workspace, *, now=None) -> list[dict]:
    """Each quota with what was used of it: today for the daily ones, this month for the monthly."""
    use = quota_usage(workspace_id=workspace.id, now=now)
    quota = Quota.objects.filter(workspace=workspace).first() or Quota(workspace=workspace)
    today = utc_today(now)
    running = Session.objects.filter(workspace=workspace, status="running").count()
    stored_mib = round(_stored_bytes(workspace) / (1024 * 1024), 1)
    spent = round(_month_spend(workspace, today), 2)
    cap = quota.monthly_spend_cap_usd
    return [
        _meter(
            "tool_calls_today", "Tool calls today", use["tool_calls"], use["tool_calls_per_day"], resets="00:00 UTC"
        ),
        _meter("turns_today", "Turns today", use["turns"], use["turns_per_day"], resets="00:00 UTC"),
        _meter(
            "agent_minutes_month",
            "Agent minutes this month",
            use["agent_minutes"],
            use["agent_minutes_per_month"],
            unit="min",
        ),
        _meter("sessions_running", "Sessions running now", running, use["concurrent_sessions"]),
        _meter("storage_mib", "Storage", stored_mib, quota.storage_mib, unit="MiB"),
        _meter("spend_month_usd", "Spend this month", spent, float(cap) if cap is not None else None, unit="$"),
    ]
