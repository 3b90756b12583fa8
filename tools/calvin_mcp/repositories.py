"""checkout_repo as an MCP tool: a thin adapter over tools.services.checkouts."""

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from tools.adapter import call_async_service
from tools.auth import caller_from_context
from tools.services.checkouts import MAX_REPOS, repos_checkout

DESCRIPTION = """Adds workspace repositories to the session directory, each as a git worktree on the session's \
branch, cloning first if needed. A repository already checked out is returned as it is. The workspace's \
repositories are listed in AGENTS.md in the session directory.

Errors: `no repository <x> in this workspace; the list is in AGENTS.md` (not in the definition), \
`<x> is not published yet` (marked unpublished); one bad name refuses the whole call."""


class CheckedOut(BaseModel):
    name: str = Field(description="The repository's name in the workspace definition.")
    full_name: str = Field(description="owner/name")
    path: str = Field(description="The checkout: a directory in the session directory, a git repository of its own.")
    branch: str = Field(description="The session's branch, checked out there.")
    commit: str | None = Field(default=None, description="The commit checked out.")
    status: str | None = Field(default=None, description="cloned, cached (from this host's cache), or already.")
    note: str | None = Field(default=None, description="Anything worth knowing (a fetch that failed).")


class CheckoutResult(BaseModel):
    tool_call_id: int = Field(description="Calvin's id for this call (audit, dashboard).")
    repos: list[CheckedOut]


RepoName = Annotated[str, Field(min_length=1, max_length=200)]


async def checkout_repo(
    repos: Annotated[
        list[RepoName],
        Field(
            min_length=1,
            max_length=MAX_REPOS,
            description="Repository names from the definition, or `owner/name` (case-insensitive).",
        ),
    ],
    ctx: Context,
) -> CheckoutResult:
    result = await call_async_service(repos_checkout, caller=caller_from_context(ctx), repos=repos)
    return CheckoutResult(tool_call_id=result["tool_call_id"], repos=result["repos"])


TOOLS = [("checkout_repo", checkout_repo, DESCRIPTION)]
