"""What a git request to a session's host carries (sessions/host/git.py answers it): the session,
its workspace's cache, the repositories' definition entries, the transports allowed, the bound on
each network step, and for a checkout the session's branch.

Made here, below the tools, because two ask for the same checkout: checkout_repo
(tools/services/checkouts.py) over the host's connection, and a code channel's checkout that a
session's first turn carries to its runner (sessions/code_channel_checkouts.py).
"""

from django.conf import settings

from sessions.models import Session
from sessions.services import session_branch_for


def definition_entry(repository) -> dict:
    return {
        "name": repository.name,
        "full_name": repository.full_name,
        "clone_url": repository.clone_url,
        "default_branch": repository.default_branch,
    }


def git_request_base(*, session_id: int, workspace_id: int, repositories: list) -> dict:
    """What every git request carries besides its own arguments."""
    return {
        "session": session_id,
        "workspace": workspace_id,
        "repos": [definition_entry(r) for r in repositories],
        "allowed_schemes": list(settings.CALVIN_REPOSITORY_SCHEMES),
        "timeout": settings.CALVIN_GIT_TIMEOUT_SECONDS,
    }


def session_branch(session_id: int) -> str:
    """The session's branch; sessions made before branches existed get theirs now."""
    branch = Session.objects.filter(id=session_id).values_list("branch", flat=True).first()
    if not branch:
        branch = session_branch_for(session_id)
        Session.objects.filter(id=session_id, branch="").update(branch=branch)
    return branch


def checkout_request(*, session_id: int, workspace_id: int, repositories: list) -> dict:
    """A `git.checkout` request: each repository checked out on the session's branch."""
    base = git_request_base(session_id=session_id, workspace_id=workspace_id, repositories=repositories)
    return {**base, "branch": session_branch(session_id)}


def unpublished(name: str) -> str:
    """Seed 000's refusal of a repository marked unpublished."""
    return f"{name} is not published yet"
