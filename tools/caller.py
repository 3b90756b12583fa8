"""Who is calling: the runner a bearer token belongs to, and its session."""

from dataclasses import dataclass

from sessions.models import Runner
from sessions.tokens import token_digest


@dataclass(frozen=True)
class Caller:
    runner_id: int
    session_id: int
    thread_id: int
    workspace_id: int
    session_directory: str
    permission_mode: str


def caller_for_token(token: str) -> Caller | None:
    """One indexed query; None for an unknown or revoked token."""
    row = (
        Runner.objects.filter(token_digest=token_digest(token), revoked_at__isnull=True)
        .values_list(
            "id",
            "session_id",
            "session__thread_id",
            "session__workspace_id",
            "session__directory",
            "session__permission_mode",
        )
        .first()
    )
    return Caller(*row) if row else None
