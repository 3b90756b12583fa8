"""spawn_thread's brief rules when the session runs on a real host: whether the brief is in a
checkout of this session, on its repository's fetched default branch, with its anchor, is
decided by the host's git, and each refusal comes back to the agent with its reason.
(tests/tools/test_spawn_thread.py checks the same rules for sessions without a host.)"""

import pytest

from calvin.workspaces.models import Repository
from sessions.models import Session
from tests.conftest import text_of
from tests.sessions.test_hosts import new_session
from tests.support.git_repos import Upstream, git
from tests.support.refusals import refusal
from tests.tools.test_host_rules_checkout import host, local_clones, on_host  # noqa: F401
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = "# Plan\n\nIntro.\n\n## Step 2: build it\n\nDo it.\n"
BRIEF = "api/docs/plan.md"


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"


def spawn(agent, brief: str):
    return agent.call("spawn_thread", {"task": "Write the API client", "brief": brief})


def test_each_brief_rule_is_refused_with_its_reason_from_the_host(host, gateway, workspace, tmp_path):  # noqa: F811
    upstream = Upstream(tmp_path / "upstream", "api", {"README.md": "# API\n", "docs/plan.md": PLAN})
    Repository.objects.create(workspace=workspace, name="api", full_name="acme/api", clone_url=upstream.url)
    [parent] = on_host(gateway, new_session(workspace))

    # A repository of the definition that this session has not checked out: only the host knows.
    assert refusal(spawn(parent, BRIEF)) == (
        f"brief {BRIEF} is not inside a repository checked out in this session (checkout_repo first)"
    )
    checked_out = parent.call("checkout_repo", {"repos": ["api"]})
    assert not checked_out.is_error, text_of(checked_out)
    worktree = host.session_directory(parent.session.id) / "api"

    refusals = {
        # Decided by the gateway before the host is asked.
        "api/docs/plan.txt": "brief api/docs/plan.txt must be a .md file",
        "/etc/plan.md": "must be a path relative to the session directory",
        "api/../api/docs/plan.md": "must be a path relative to the session directory",
        "notes/plan.md": "is not inside a repository of this workspace checked out in this session",
        f"{BRIEF}#": "the anchor after '#'",
        # Decided by the host's git, on the default branch it fetched.
        f"{BRIEF}#no-such-heading": (
            "anchor #no-such-heading is not a heading in docs/plan.md on main (headings: #plan, #step-2-build-it)"
        ),
        "api/docs/missing.md": (
            "brief docs/missing.md is not on acme/api's default branch main as fetched (commit and push it there first)"
        ),
    }
    for brief, reason in refusals.items():
        assert reason in refusal(spawn(parent, brief)), brief

    # Committed in the session's checkout on the host, not pushed: not on the default branch.
    (worktree / "docs" / "next.md").write_text("# Next\n")
    git("add", "docs/next.md", cwd=worktree)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "next", cwd=worktree)
    assert "brief docs/next.md is not on acme/api's default branch main as fetched" in refusal(
        spawn(parent, "api/docs/next.md")
    )
    assert not Session.objects.filter(parent=parent.session).exists()
    assert not ToolCall.objects.filter(tool="spawn_thread").exists()

    # Pushed: the host fetches it, and the same call is taken.
    upstream.commit({"docs/next.md": "# Next\n"}, "pushed")
    taken = spawn(parent, "api/docs/next.md#next")
    assert not taken.is_error, text_of(taken)
    assert Session.objects.filter(parent=parent.session).count() == 1
