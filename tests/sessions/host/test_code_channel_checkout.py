"""A code channel's checkout on the host: a real runner, real git and a real upstream repository.
The turn's checkout request is answered by checkout_repo's own host code before the agent runs,
the agent is told in a [system] line, the gateway gets a turn.checkout report, and a failure is
told without failing the turn."""

import pytest

from tests.sessions.host import Roots, a_turn, run_turn, shell
from tests.support.git_repos import Upstream, git

AGENT = shell("cat; echo; echo ---; ls; cat web/index.html 2>/dev/null || echo no-checkout")


@pytest.fixture
def upstream(tmp_path):
    return Upstream(tmp_path / "upstream", "web", {"index.html": "<h1>web</h1>\n"})


def spec(upstream, *, session: int = 1, **fields) -> dict:
    """What the gateway's turn message carries (sessions/code_channel_checkouts.py)."""
    request = {
        "session": session,
        "workspace": 3,
        "repos": [{"name": "web", "full_name": "acme/web", "clone_url": upstream.url, "default_branch": "main"}],
        "allowed_schemes": ["https", "ssh", "git", "file"],
        "timeout": 60,
        "branch": f"calvin/session-{session}",
    }
    return {"code_channel": 7, "label": "#web", "repository": "acme/web", "name": "web", "request": request} | fields


def reports(emitted) -> list[dict]:
    return [message for message in emitted if message["type"] == "turn.checkout"]


@pytest.mark.parametrize("kind", ["bwrap", "none"])
def test_the_repository_is_checked_out_before_the_agent_runs_and_the_agent_is_told(tmp_path, upstream, kind):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.sandbox(kind), git_state_dir=tmp_path)
    finished = run_turn(runner, a_turn(AGENT, number=5, prompt="fix the header", checkout=spec(upstream)))
    assert finished["status"] == "done", finished
    told, _, listing = finished["reply"].partition("---")
    assert told.startswith(
        "[system] This thread is in the code channel #web, bound to acme/web: it is checked out at ./web on branch"
        " calvin/session-1.\n\nfix the header"
    ), told
    assert "<h1>web</h1>" in listing  # there before the agent's first command
    worktree = runner.directory / "web"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=worktree) == "calvin/session-1"
    (report,) = reports(emitted)
    assert report["turn"] == 5 and report["code_channel"] == 7 and report["ok"] is True
    (entry,) = report["repos"]
    assert entry["path"] == str(worktree) and entry["status"] == "cloned" and entry["commit"] == upstream.head
    # Its mirror is the host's cache, shared with checkout_repo.
    assert list((tmp_path / "git" / "workspace-3").glob("*.git"))


def test_a_checkout_that_fails_is_told_and_the_turn_runs_anyway(tmp_path, upstream):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.none(), git_state_dir=tmp_path)
    broken = spec(upstream)
    broken["request"]["repos"][0]["clone_url"] = f"file://{tmp_path}/no-such.git"
    finished = run_turn(runner, a_turn(AGENT, checkout=broken))
    assert finished["status"] == "done", finished
    told = finished["reply"]
    assert "[system] This thread is in the code channel #web, bound to acme/web, but it could not be checked" in told
    assert "could not check out acme/web" in told and "Call checkout_repo with web if you need it." in told
    assert "no-checkout" in told
    (report,) = reports(emitted)
    assert report["ok"] is False and "could not check out acme/web" in report["error"]


def test_the_gateways_own_refusal_is_told_without_any_git(tmp_path, upstream):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.none(), git_state_dir=tmp_path)
    refused = {key: value for key, value in spec(upstream).items() if key != "request"}
    finished = run_turn(runner, a_turn(AGENT, checkout=refused | {"error": "acme/web is not published yet"}))
    assert "could not be checked out before this turn: acme/web is not published yet." in finished["reply"]
    assert reports(emitted)[0]["error"] == "acme/web is not published yet"
    assert not (tmp_path / "git").exists()


def test_a_request_for_another_session_is_not_done_here(tmp_path, upstream):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.none(), git_state_dir=tmp_path)
    (roots.sessions / "session-2").mkdir(parents=True)
    finished = run_turn(runner, a_turn(AGENT, checkout=spec(upstream, session=2)))
    assert "the turn's checkout request is not for this session" in finished["reply"]
    assert reports(emitted)[0]["ok"] is False
    assert not (roots.sessions / "session-2" / "web").exists() and not (runner.directory / "web").exists()


def test_a_turn_without_a_checkout_is_an_ordinary_turn(tmp_path, upstream):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.none(), git_state_dir=tmp_path)
    finished = run_turn(runner, a_turn(AGENT, prompt="hello", checkout=None))
    assert finished["reply"].startswith("hello\n") and "[system]" not in finished["reply"]
    assert reports(emitted) == [] and not (runner.directory / "web").exists()
