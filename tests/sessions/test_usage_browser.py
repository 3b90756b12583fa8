"""A spend cap stops a turn, seen in Chromium: a real host runs a script agent that reports what
it spent while it works; past the session's cap the gateway stops the running turn (Stop's own
path), the thread says so and names the cap, the header shows the spend against it, and the next
message is refused with the cap's wording. Then the month's cap refuses another session's turn."""

import os
from decimal import Decimal
from pathlib import Path

import pytest

from calvin.workspaces.models import Quota
from calvin.workspaces.quotas import month_bounds, utc_today
from sessions.models import Turn
from tests.conftest import wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, browser, browser_login, page  # noqa: F401 (fixtures)
from tests.sessions.host_processes import scripted, system_texts, wait_connected
from tests.sessions.test_hosts import new_session, say

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("CALVIN_VAR_DIR", "var")) / "screenshots"


def test_a_spend_cap_stops_the_running_turn_and_refuses_the_next(gateway, hosts, workspace, page):  # noqa: F811
    Quota.objects.filter(workspace=workspace).update(
        session_spend_cap_usd=Decimal("1.00"), monthly_spend_cap_usd=Decimal("2.00")
    )
    session = new_session(workspace, "Costly work")
    # Spends $1.20 at once, then would work for a long while: the cap must end it, not the script.
    scripted(session.agent, [{"usage": {"cost_usd": 1.2, "output_tokens": 900}}, {"sleep": 600}, {"reply": "never"}])
    wait_connected(hosts("h1"))
    say(session, "work hard")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.STOPPED).exists(), timeout=60)
    stopped = "Stopped (stopped from the per-session spend cap of $1.00)."
    wait_for(lambda: stopped in system_texts(session), timeout=20)

    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.goto(f"{gateway}/threads/{session.thread_id}/")
    # Shown in people's words (P5's notices), naming the cap.
    assert "Stopped from the per-session spend cap of $1.00" in page.inner_text("body")
    usage = page.inner_text("#thread-usage")
    assert "$1.20 spent of $1.00 (session cap)" in usage and "900 tokens" in usage
    assert "workspace: $1.20 of $2.00 this month" in usage

    say(session, "once more")
    refusal = "Not run: workspace quota reached: the per-session spend cap of $1.00 ($1.20 spent in this session)"
    wait_for(lambda: any(text.startswith(refusal) for text in system_texts(session)), timeout=30)
    page.reload()
    assert "the per-session spend cap of $1.00 ($1.20 spent in this session)" in page.inner_text("body")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "thread-spend-cap.png"), full_page=True)

    # Another session spends the month's rest; past the monthly cap the next turn is not run.
    other = new_session(workspace, "More work")
    scripted(other.agent, [{"usage": {"cost_usd": 0.9}}, {"reply": "done"}])
    say(other, "go")
    wait_for(lambda: Turn.objects.filter(session=other, status=Turn.Status.DONE).exists(), timeout=60)
    say(other, "and again")
    following = month_bounds(utc_today())[1]
    monthly = (
        "Not run: workspace quota reached: the monthly spend cap of $2.00 ($2.10 spent this month); "
        f"it resets on {following.day} {following:%B} 00:00 UTC"
    )
    wait_for(lambda: monthly in system_texts(other), timeout=30)
    page.goto(f"{gateway}/threads/{other.thread_id}/")
    shown = page.inner_text("body")
    assert "the monthly spend cap of $2.00 ($2.10 spent this month)" in shown
    assert f"it resets on {following.day} {following:%B} 00:00 UTC" in shown
