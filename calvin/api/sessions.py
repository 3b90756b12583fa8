"""Sessions: list, get, their messages, and stop (a person at once; an agent after approval)."""

from django.urls import reverse
from ninja import Query, Router
from pydantic import Field

from calvin.api import scope
from calvin.api.agent_writes import agent_write_request, approval_pending
from calvin.api.idempotency import idempotent
from calvin.api.pagination import PageQuery, page, page_of
from calvin.api.problems import Problem
from calvin.api.schemas import DecisionOut, MessageOut, SessionOut
from calvin.api.schemas import Problem as ProblemOut
from calvin.workspaces.models import Member
from sessions.models import Session
from sessions.turns import session_stop

router = Router(tags=["sessions"])


class SessionQuery(PageQuery):
    status: Session.Status | None = Field(None, description="Only sessions in this status.")
    agent: int | None = Field(None, ge=1, le=2**63 - 1, description="Only this agent's sessions.")


def session_shown(session: Session) -> dict:
    return {
        "id": session.id,
        "title": session.thread.title,
        "status": session.status,
        "channel": session.thread.channel_kind,
        "agent_id": session.agent_id,
        "owner_id": session.owner_id,
        "parent_id": session.parent_id,
        "host": session.host.name if session.host_id else None,
        "thread_id": session.thread_id,
        "url": reverse("dashboard:thread", kwargs={"thread_id": session.thread_id}),
        "created_at": session.created_at,
        "updated_at": session.updated_at,
    }


def message_shown(message) -> dict:
    return {
        "id": message.id,
        "author": message.author,
        "kind": message.kind,
        "text": message.text,
        "member_id": message.member_id,
        "created_at": message.created_at,
    }


def _visible(principal):
    return scope.sessions_visible(principal).select_related("thread", "host")


@router.get("/sessions", response=page_of(SessionOut), summary="List sessions")
def sessions_list(request, query: Query[SessionQuery]):
    sessions = _visible(request.auth)
    if query.status:
        sessions = sessions.filter(status=query.status)
    if query.agent:
        sessions = sessions.filter(agent_id=query.agent)
    return page(sessions, query, session_shown)


@router.get("/sessions/{session_id}", response=SessionOut, summary="Get a session")
def sessions_get(request, session_id: int):
    return session_shown(scope.one(_visible(request.auth), session_id, "session"))


@router.get("/sessions/{session_id}/messages", response=page_of(MessageOut), summary="List a session's messages")
def sessions_messages(request, session_id: int, query: Query[PageQuery]):
    session = scope.one(_visible(request.auth), session_id, "session")
    return page(scope.messages_visible(request.auth, session), query, message_shown)


@router.post(
    "/sessions/{session_id}/stop",
    response={200: DecisionOut, 202: DecisionOut, 403: ProblemOut, 404: ProblemOut, 409: ProblemOut, 422: ProblemOut},
    summary="Stop a session's turn (an agent's stop waits for approval)",
)
def sessions_stop(request, session_id: int):
    principal = request.auth

    def change():
        session = scope.one(_visible(principal), session_id, "session")
        if principal.is_agent:
            approval = agent_write_request(
                principal=principal,
                action="sessions.stop",
                arguments={"session": session.id},
                summary=f"stop session {session.id} ({session.thread.title or 'untitled'})",
            )
            return approval_pending(approval)
        member = Member.objects.select_related("user").get(id=principal.member_id)
        if not session.may_be_decided_by(member):
            raise Problem(403, "only the person who started this session or a workspace admin can stop it")
        return 200, {"status": "done", "detail": session_stop(session_id=session.id, member=member, via="api")}

    return idempotent(request, principal, change)
