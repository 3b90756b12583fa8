"""preview and unpreview (seed 000): a port of the session's sandbox at a URL of its own.

Seed 000's availability table: in self-hosted mode both are "offered, but the gateway refuses
the call"; in hosted mode they are served (the traffic travels over the session's host's
connection, docs/previews.md). Here: the rules of a name, the host's word on whether the port
listens, and the rows, each change audited in its own transaction. Ending a preview lives here
too, so the agent's `unpreview`, a person's "Take down" and the lifecycle (calvin/previews) end
it one way.
"""

import secrets

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from calvin.audit.services import audit_record
from calvin.events import PreviewsChanged, announce, on_commit_once
from calvin.previews.addresses import LABEL_RE, preview_domain, preview_url
from calvin.previews.models import Preview
from calvin.workspaces.models import Agent
from sessions.hosts import host_is_live
from sessions.models import Host, Session
from tools.availability import SELF_HOSTED
from tools.caller import Caller
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.common import off_loop, secret_scanner_for, tool_call_record

MAX_LABEL = 63
MAX_LIVE_PER_SESSION = 20
# A generated name: 16 hex characters from secrets.token_hex(8), 64 bits of randomness.
GENERATED_BYTES = 8
PROBE = "preview.probe"

LABEL_RULE = (
    f"name: one DNS label (lowercase letters, digits and hyphens, not first or last; at most {MAX_LABEL} characters)"
)
SELF_HOSTED_REFUSAL = (
    "preview is not available on a self-hosted gateway: it does not serve public preview URLs."
    " The server on port {port} still runs; reach it on the host itself"
)
NO_DOMAIN = (
    "this gateway serves no preview URLs: its operator must set CALVIN_PREVIEW_DOMAIN (a wildcard DNS name"
    " pointed at the gateway) first; nothing was published"
)
NO_HOST = (
    "this session does not run on one of Calvin's hosts (its runner was issued by hand), and previews are"
    " served only from a host's sandbox; nothing was published"
)
NO_SANDBOX = (
    "the session's host runs agents without a sandbox, and such a host serves no previews (it cannot tell"
    " the session's port from the host's own); nothing was published"
)
OLD_HOST = "the session's host does not serve previews (its daemon is older than previews); nothing was published"


def label_problem(name: str) -> str | None:
    return None if LABEL_RE.fullmatch(name) else LABEL_RULE


def taken(name: str) -> str:
    return f"the name {name} is taken by another session's preview; choose another, or omit name for a generated one"


def cap_reached() -> str:
    return (
        f"this session has {MAX_LIVE_PER_SESSION} live previews, the most it may have; take one down with"
        " unpreview first"
    )


def name_generated() -> str:
    return secrets.token_hex(GENERATED_BYTES)


# --- Ending a preview: one way for unpreview, people and the lifecycle ---------------------------


def session_previews_push(session_id: int) -> None:
    """After the commit, tell the session's host which ports its live previews publish (it keeps
    the sandbox of a session with previews after the turn); once per transaction per session.
    The thread page's previews panel hears of it through the live log."""
    where = Session.objects.filter(id=session_id).values("workspace_id", "thread_id").first()
    if where:
        announce(PreviewsChanged(session_id=session_id, **where))

    def push() -> None:
        from sessions.host_link import host_send

        host_id = Session.objects.filter(id=session_id).values_list("host_id", flat=True).first()
        if host_id:
            ports = Preview.objects.live().filter(session_id=session_id).ports()
            host_send(host_id, {"type": "session.previews", "session": session_id, "ports": ports})

    on_commit_once(("session.previews", session_id), push)


def preview_end(*, preview_id: int, reason: str, actor=None, by: str = "", via: str | None = None) -> bool:
    """Mark a preview ended (not served from the commit on) with an audit row; False when it had
    ended already. `actor`: a Member, User, Agent or None (the system), as audit_record takes."""
    with transaction.atomic():
        preview = Preview.objects.select_for_update().filter(id=preview_id, removed_at__isnull=True).first()
        if preview is None:
            return False
        now = timezone.now()
        Preview.objects.filter(id=preview.id).update(removed_at=now, removed_reason=reason, removed_by=by[:200])
        audit_record(
            verb="preview.remove",
            workspace=preview.workspace_id,
            actor=actor,
            target=preview,
            changes={"removed_at": (None, now.isoformat()), "removed_reason": ("", reason)},
            via=via,
        )
        session_previews_push(preview.session_id)
        return True


def previews_end(*, previews, reason: str, actor=None, by: str = "", via: str | None = None) -> int:
    """preview_end for each row of a queryset not ended yet; returns how many ended."""
    ids = list(previews.filter(removed_at__isnull=True).values_list("id", flat=True))
    return sum(preview_end(preview_id=i, reason=reason, actor=actor, by=by, via=via) for i in ids)


# --- preview ------------------------------------------------------------------------------------


def _agent_of(caller: Caller):
    return Agent.objects.filter(id=caller.agent_id).first() if caller.agent_id else None


def _made_by(caller: Caller, agent) -> str:
    return f"agent {agent.name}" if agent else f"runner {caller.runner_id} of session {caller.session_id}"


def _name_for(*, caller: Caller, port: int, name: str | None) -> tuple[str, Preview | None]:
    """The name this call gives the port, and this session's live preview of it if there is one."""
    mine = Preview.objects.live().filter(session_id=caller.session_id)
    if name is None:
        existing = mine.filter(port=port).order_by("-created_at", "-id").first()
        if existing is not None:
            return existing.name, existing
        name, existing = name_generated(), None
    else:
        existing = Preview.objects.live().filter(name=name).first()
        if existing is not None and existing.session_id != caller.session_id:
            raise ToolRefused(taken(name))
    if existing is None and mine.count() >= MAX_LIVE_PER_SESSION:
        raise ToolRefused(cap_reached())
    return name, existing


def preview_plan(*, caller: Caller, port: int, name: str | None) -> list[int]:
    """Everything refused before the host is asked; returns the ports the session's previews
    will publish (the probe carries them: the host keeps the sandbox for them from then on)."""
    if name is not None and label_problem(name):
        raise ToolRefused(LABEL_RULE)
    if settings.CALVIN_MODE == SELF_HOSTED:
        raise ToolRefused(SELF_HOSTED_REFUSAL.format(port=port))
    if not preview_domain():
        raise ToolRefused(NO_DOMAIN)
    if caller.host_id is None:
        raise ToolRefused(NO_HOST)
    host = Host.objects.filter(id=caller.host_id).first()
    if host is None or not host_is_live(host):
        raise ToolRefused("the session's host is not connected; nothing was published")
    if host.sandbox == "none":
        raise ToolRefused(NO_SANDBOX)
    _name_for(caller=caller, port=port, name=name)
    return sorted({*Preview.objects.live().filter(session_id=caller.session_id).ports(), port})


async def preview_probe(*, caller: Caller, port: int, ports: list[int]) -> bool:
    """Whether something listens on the port in the session's sandbox, as its host says now."""
    from sessions.host_link import HostRefused, HostUnavailable, host_ask

    try:
        answer = await host_ask(
            host_id=caller.host_id,
            op=PROBE,
            arguments={"session": caller.session_id, "port": port, "ports": ports},
            timeout=settings.CALVIN_PREVIEW_OPEN_SECONDS,
        )
    except HostUnavailable as exc:
        raise ToolRefused(f"{exc}; nothing was published") from None
    except HostRefused as exc:
        if str(exc) == "unknown request":
            raise ToolRefused(OLD_HOST) from None
        raise ToolRefused(f"the session's host refused: {exc}; nothing was published") from None
    if answer.get("why") == "no_sandbox":
        raise ToolRefused(NO_SANDBOX)
    return answer.get("listening") is True


def _expired_end(name: str) -> None:
    """An expired row keeps its name until it is marked ended: mark it now, so the name is free."""
    previews_end(previews=Preview.objects.expired().filter(name=name), reason=Preview.Reason.EXPIRED)


@transaction.atomic
def preview_record(*, caller: Caller, port: int, name: str | None, listening: bool) -> dict:
    """The preview's row (made, or its port moved), the call and the audit row: all or nothing."""
    # One call of a session at a time from here on: the cap and "this port's name" hold.
    Session.objects.select_for_update().filter(id=caller.session_id).values_list("id", flat=True).first()
    if name is not None:
        _expired_end(name)
    name, existing = _name_for(caller=caller, port=port, name=name)
    tool_call_record(
        caller=caller,
        tool="preview",
        arguments={"port": port, "name": name},
        payload={},
        secrets=secret_scanner_for(caller),
        status=ToolCall.Status.APPLIED,  # done here: nothing for the worker to do
    )
    agent = _agent_of(caller)
    if existing is None:
        try:
            with transaction.atomic():
                preview = Preview.objects.create(
                    workspace_id=caller.workspace_id,
                    session_id=caller.session_id,
                    name=name,
                    port=port,
                    created_by=_made_by(caller, agent),
                )
        except IntegrityError:  # another session took the name since it was looked at
            raise ToolRefused(taken(name)) from None
        changes = {"name": (None, name), "port": (None, port), "access": (None, preview.access)}
        audit_record(
            verb="preview.create",
            workspace=caller.workspace_id,
            actor=agent,
            target=preview,
            changes=changes,
            via="mcp",
        )
        session_previews_push(caller.session_id)
    elif existing.port != port:  # the name now points at another port of the same sandbox
        Preview.objects.filter(id=existing.id).update(port=port)
        audit_record(
            verb="preview.change",
            workspace=caller.workspace_id,
            actor=agent,
            target=existing,
            changes={"port": (existing.port, port)},
            via="mcp",
        )
        session_previews_push(caller.session_id)
    return {"url": preview_url(name), "name": name, "listening": listening}


async def preview_open(*, caller: Caller, port: int, name: str | None) -> dict:
    ports = await off_loop(preview_plan)(caller=caller, port=port, name=name)
    listening = await preview_probe(caller=caller, port=port, ports=ports)
    return await off_loop(preview_record)(caller=caller, port=port, name=name, listening=listening)


# --- unpreview ----------------------------------------------------------------------------------


@transaction.atomic
def preview_close(*, caller: Caller, name: str) -> dict:
    if label_problem(name):
        raise ToolRefused(LABEL_RULE)
    if settings.CALVIN_MODE == SELF_HOSTED:
        raise ToolRefused("unpreview is not available on a self-hosted gateway: it serves no preview URLs")
    preview = Preview.objects.live().filter(name=name).first()
    if preview is None:
        raise ToolRefused(f"there is no live preview named {name} (never made, taken down, or expired)")
    if preview.session_id != caller.session_id:
        raise ToolRefused(f"the preview {name} is another session's; a session takes down only its own previews")
    tool_call_record(
        caller=caller,
        tool="unpreview",
        arguments={"name": name},
        payload={},
        secrets=secret_scanner_for(caller),
        status=ToolCall.Status.APPLIED,
    )
    agent = _agent_of(caller)
    removed = preview_end(
        preview_id=preview.id, reason=Preview.Reason.UNPREVIEW, actor=agent, by=_made_by(caller, agent), via="mcp"
    )
    return {"name": name, "removed": removed}
