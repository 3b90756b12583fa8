"""The workspace home: sessions by state, filters, search, paging, what waits for a person, hosts and
today's use; each with a second workspace's data present that must not show."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import PendingApproval
from calvin.workspaces.models import Agent, DailyUsage, Member, StorageUsage
from secrets_vault.models import SecretRequest
from sessions.models import Host, Session
from sessions.services import session_start
from tools.models import Question, ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_client(client, owner_member):
    client.force_login(owner_member.user)
    return client


def start(workspace, owner, title, *, status="queued", agent=None):
    session = session_start(workspace=workspace, owner=owner, prompt=title, agent=agent)
    Session.objects.filter(id=session.id).update(status=status)
    return session


def approval_for(session, *, expires_in=timedelta(hours=1), status="pending"):
    return PendingApproval.objects.create(
        session=session,
        kind="post_thread",
        summary=f"post in #general for {session.thread.title}",
        details={"channel": "#general", "text": "hello"},
        status=status,
        expires_at=timezone.now() + expires_in,
    )


def question_for(session, *, expires_in=timedelta(hours=1)):
    call = ToolCall.objects.create(session=session, tool="ask_user_question", status=ToolCall.Status.APPLIED)
    return Question.objects.create(
        tool_call=call,
        title="Which branch?",
        text="Deploy which one?",
        options=[
            {"label": "main", "selectedLabel": "main it is", "value": "main"},
            {"label": "dev", "selectedLabel": "dev it is", "value": "dev"},
        ],
        expires_at=timezone.now() + expires_in,
    )


def secret_request_for(session):
    call = ToolCall.objects.create(session=session, tool="request_secret", status=ToolCall.Status.APPLIED)
    return SecretRequest.objects.create(session=session, tool_call=call, name="NPM_TOKEN", reason="to publish")


def count(page: str, state: str) -> int:
    return int(re.search(rf'id="count-{state}">(\d+)<', page).group(1))


def rows(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'data-row-key="session:(\d+)"', page)]


@pytest.fixture
def acme_and_globex(workspace, owner_member, other_workspace, stranger_member):
    """Acme: one session of each state (three waiting, each for another reason), and some that
    only look waiting; Globex: a session of each state too, which Acme's page must not count."""
    made = {
        "running": start(workspace, owner_member, "Acme build", status="running"),
        "idle": start(workspace, owner_member, "Acme docs", status="idle"),
        "queued": start(workspace, owner_member, "Acme queued"),
        "finished": start(workspace, owner_member, "Acme done", status="finished"),
        "failed": start(workspace, owner_member, "Acme broke", status="failed"),
        "approval": start(workspace, owner_member, "Acme wants to post", status="running"),
        "question": start(workspace, owner_member, "Acme asks", status="running"),
        "secret": start(workspace, owner_member, "Acme needs a token", status="idle"),
        "expired": start(workspace, owner_member, "Acme expired ask", status="idle"),
    }
    made["approval_row"] = approval_for(made["approval"])
    made["question_row"] = question_for(made["question"])
    made["secret_row"] = secret_request_for(made["secret"])
    approval_for(made["expired"], expires_in=timedelta(minutes=-1))  # past its expiry: nobody can decide
    approval_for(made["idle"], status="denied")  # decided
    for status in ("running", "idle", "finished", "queued"):
        foreign = start(other_workspace, stranger_member, f"Globex {status}", status=status)
    approval_for(foreign)
    question_for(foreign)
    return made


def test_sessions_are_counted_by_state_and_waiting_for_a_person_wins_over_running(owner_client, acme_and_globex):
    page = owner_client.get("/w/acme/").content.decode()
    assert {state: count(page, state) for state in ("running", "waiting", "queued", "idle", "stopped")} == {
        "running": 1,
        "waiting": 3,
        "queued": 1,
        "idle": 2,  # the idle one and the one whose approval expired
        "stopped": 2,
    }
    assert re.search(r'data-state="all">All <span class="count">9<', page)
    assert "Globex" not in page


def test_an_external_agents_session_with_messages_waits_for_its_agent_not_a_host(
    owner_client, workspace, owner_member, other_workspace, stranger_member
):
    external = Agent.objects.create(workspace=workspace, name="mine", provider=Agent.Provider.EXTERNAL)
    theirs = start(workspace, owner_member, "Acme runs its own", agent=external)
    hosted = start(workspace, owner_member, "Acme hosted")
    foreign = Agent.objects.create(workspace=other_workspace, name="mine", provider=Agent.Provider.EXTERNAL)
    start(other_workspace, stranger_member, "Globex runs its own", agent=foreign)
    page = owner_client.get("/w/acme/").content.decode()
    assert (count(page, "agent"), count(page, "queued")) == (1, 1)
    listed = owner_client.get("/w/acme/?state=agent").content.decode()
    assert rows(listed) == [theirs.id] and "waiting for your agent" in listed and hosted.id not in rows(listed)


def test_the_state_filter_lists_only_that_state(owner_client, acme_and_globex):
    made = acme_and_globex
    page = owner_client.get("/w/acme/?state=waiting").content.decode()
    assert sorted(rows(page)) == sorted(made[k].id for k in ("approval", "question", "secret"))
    assert "waiting for a person" in page
    page = owner_client.get("/w/acme/?state=stopped").content.decode()
    assert sorted(rows(page)) == sorted([made["finished"].id, made["failed"].id])
    # An unknown state is no filter (and no error).
    assert len(rows(owner_client.get("/w/acme/?state=bogus").content.decode())) == 9


def test_search_reads_titles_agents_and_thread_text_of_this_workspace_only(
    owner_client, workspace, owner_member, other_workspace, stranger_member
):
    reviewer = Agent.objects.create(workspace=workspace, name="reviewer")
    by_title = start(workspace, owner_member, "Fix the flaky login test")
    by_agent = start(workspace, owner_member, "Nightly", agent=reviewer)
    by_text = start(workspace, owner_member, "Chores")
    by_text.thread.messages.create(kind="text", author="agent", text="I also looked at the LOGIN page.")
    start(workspace, owner_member, "Something else")
    foreign_agent = Agent.objects.create(workspace=other_workspace, name="reviewer")
    start(other_workspace, stranger_member, "Globex login plan", agent=foreign_agent)

    assert sorted(rows(owner_client.get("/w/acme/?q=login").content.decode())) == sorted([by_title.id, by_text.id])
    assert rows(owner_client.get("/w/acme/?q=review").content.decode()) == [by_agent.id]
    page = owner_client.get("/w/acme/?q=nothing-like-it").content.decode()
    assert rows(page) == [] and "No session matches." in page
    assert "Globex" not in owner_client.get("/w/acme/?q=login").content.decode()


def test_agent_and_person_filters_take_only_this_workspaces_ids(
    owner_client, workspace, owner_member, plain_member, other_workspace, stranger_member
):
    reviewer = Agent.objects.create(workspace=workspace, name="reviewer")
    mine = start(workspace, owner_member, "Mine", agent=reviewer)
    theirs = start(workspace, plain_member, "Theirs")
    foreign_agent = Agent.objects.create(workspace=other_workspace, name="spy")
    start(other_workspace, stranger_member, "Globex", agent=foreign_agent)

    assert rows(owner_client.get(f"/w/acme/?agent={reviewer.id}").content.decode()) == [mine.id]
    assert rows(owner_client.get(f"/w/acme/?person={plain_member.id}").content.decode()) == [theirs.id]
    # Another workspace's agent or person is no filter: the page lists Acme's sessions, none of Globex's.
    for query in (f"agent={foreign_agent.id}", f"person={stranger_member.id}", "agent=x", "person=" + "9" * 20):
        page = owner_client.get(f"/w/acme/?{query}").content.decode()
        assert sorted(rows(page)) == sorted([mine.id, theirs.id]), query
    page = owner_client.get("/w/acme/").content.decode()
    assert f'<option value="{reviewer.id}">reviewer</option>' in page and "spy" not in page
    assert f'<option value="{plain_member.id}">member</option>' in page and "stranger" not in page


def test_every_session_is_reachable_page_by_page(owner_client, workspace, owner_member):
    made = [start(workspace, owner_member, f"Session {i}") for i in range(60)]
    first = owner_client.get("/w/acme/").content.decode()
    assert rows(first) == [s.id for s in reversed(made)][:25]
    assert "Page 1 of 3 (60 sessions)" in first and 'rel="next" href="?page=2"' in first
    last = owner_client.get("/w/acme/?page=3").content.decode()
    assert rows(last) == [s.id for s in reversed(made)][50:]
    assert made[0].id in rows(last)  # the oldest, not only the latest 50
    # Filters travel with the pages; a bad page number is the nearest page, not an error.
    assert 'href="?state=queued&amp;page=2"' in owner_client.get("/w/acme/?state=queued").content.decode()
    assert rows(owner_client.get("/w/acme/?page=abc").content.decode()) == rows(first)
    assert rows(owner_client.get("/w/acme/?page=999").content.decode()) == rows(last)


def test_pending_approvals_and_questions_show_with_decide_buttons(owner_client, acme_and_globex):
    made = acme_and_globex
    page = owner_client.get("/w/acme/").content.decode()
    approval, question = made["approval_row"], made["question_row"]
    thread = made["approval"].thread_id
    assert f'action="/threads/{thread}/actions/approval/{approval.id}/"' in page
    assert 'value="approve"' in page and 'value="deny"' in page
    q_thread = made["question"].thread_id
    assert f'action="/threads/{q_thread}/actions/question/{question.tool_call_id}/"' in page
    assert '<button type="submit" name="value" value="1">dev</button>' in page
    assert f"/threads/{made['secret'].thread_id}/secrets/{made['secret_row'].tool_call_id}/" in page
    assert "post in #general for Acme wants to post" in page
    assert "Acme expired ask" not in page.split('id="sessions"')[0]  # an expired approval waits for nobody
    assert 'id="waiting-count">3<' in page


def test_a_decision_from_the_home_is_the_threads_decision(owner_client, acme_and_globex, plain_member, client):
    """The button's form posts to the cards' endpoint: the same compare-and-swap, once."""
    made = acme_and_globex
    approval = made["approval_row"]
    url = f"/threads/{made['approval'].thread_id}/actions/approval/{approval.id}/"
    answer = owner_client.post(url, {"value": "deny"}).json()
    assert answer["ok"] and answer["text"].startswith("Denied")
    approval.refresh_from_db()
    assert approval.status == "denied" and approval.decided_via == "web"
    again = owner_client.post(url, {"value": "approve"})
    assert again.status_code == 409
    page = owner_client.get("/w/acme/").content.decode()
    assert f"actions/approval/{approval.id}/" not in page and count(page, "waiting") == 2


def test_a_member_who_may_not_decide_sees_no_buttons(client, acme_and_globex, plain_member):
    client.force_login(plain_member.user)
    page = client.get("/w/acme/").content.decode()
    assert "Approval" in page and "actions/approval/" not in page and "actions/question/" not in page
    assert "Only owner or a workspace admin can decide this." in page


def test_hosts_serving_the_workspace_with_health_and_this_workspaces_load(
    owner_client, workspace, owner_member, other_workspace, stranger_member, settings
):
    now = timezone.now()
    lapse = timedelta(seconds=settings.CALVIN_HOST_LAPSE_SECONDS + 5)

    def host(name, ws, **fields):
        return Host.objects.create(name=name, workspace=ws, token_digest=name, token_hint=name[:4], **fields)

    own = host("acme-box", workspace, capacity=4, channel_name="c1", last_heartbeat_at=now)
    shared = host("shared-box", None, capacity=8, channel_name="c2", last_heartbeat_at=now - lapse)
    host("sleeping-box", workspace, capacity=2)
    host("globex-box", other_workspace, capacity=9, channel_name="c3", last_heartbeat_at=now)
    host("revoked-box", workspace, revoked_at=now)
    for ws, person, where in ((workspace, owner_member, own), (workspace, owner_member, shared)):
        Session.objects.filter(id=start(ws, person, "runs", status="running").id).update(host=where)
    for _ in range(3):  # Globex's work on the shared host is not Acme's load
        Session.objects.filter(id=start(other_workspace, stranger_member, "g", status="running").id).update(host=shared)

    page = owner_client.get("/w/acme/").content.decode()
    panel = page.split('data-live-panel="hosts"')[1].split("</table>")[0]
    assert "globex-box" not in panel and "revoked-box" not in panel
    assert re.search(r"acme-box</td>\s*<td><span class=\"health health-connected\">online", panel)
    assert re.search(r"shared-box <span class=\"status\">\(shared\)</span></td>\s*<td><span[^>]*>heartbeat late", panel)
    assert re.search(r"sleeping-box</td>\s*<td><span[^>]*>offline</span></td>\s*<td>never", panel)
    assert "<td>1 / 4</td>" in panel and "1 / 8" in panel


def test_todays_use_against_each_quota_counts_this_workspace_only(
    owner_client, workspace, owner_member, other_workspace
):
    today = timezone.now().date()
    DailyUsage.objects.create(workspace=workspace, day=today, tool_calls=1234, turns=56, agent_seconds=600, cost_usd=3)
    DailyUsage.objects.create(workspace=other_workspace, day=today, tool_calls=9, turns=9, agent_seconds=99999)
    StorageUsage.objects.create(workspace=workspace, bytes=5 * 1024 * 1024)
    workspace.quota.monthly_spend_cap_usd = 10
    workspace.quota.save()
    start(workspace, owner_member, "now", status="running")

    panel = owner_client.get("/w/acme/").content.decode().split('data-live-panel="usage"')[1].split("</table>")[0]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", panel))
    assert "Tool calls today 1234 of 10000" in text
    assert "Turns today 56 of 2000" in text
    assert "Agent minutes this month 10.0 min of 30000" in text
    assert "Sessions running now 1 of 10" in text
    assert "Storage 5.0 MiB of 10240" in text
    assert "Spend this month $3.00 of $10.00 30 %" in text


def test_the_page_is_marked_for_live_refresh(owner_client, workspace, acme_and_globex):
    page = owner_client.get("/w/acme/").content.decode()
    assert f'data-live-stream="/ws/workspaces/{workspace.id}/"' in page
    for panel in ("waiting", "session-states", "sessions", "hosts", "usage", "tool-calls"):
        assert page.count(f'data-live-panel="{panel}"') == 1, panel
    assert f'data-row-key="session:{acme_and_globex["running"].id}"' in page
    assert f'data-row-key="approval:{acme_and_globex["approval_row"].id}"' in page


def test_names_people_and_agents_wrote_stay_text(owner_client, workspace, owner_member):
    Member.objects.filter(id=owner_member.id).update(display_name="<b>Ann</b>")
    agent = Agent.objects.create(workspace=workspace, name="<i>bot</i>")
    session = start(workspace, owner_member, "<script>alert(1)</script>", agent=agent)
    approval_for(session)
    page = owner_client.get("/w/acme/").content.decode()
    assert "<script>alert" not in page and "<b>Ann" not in page and "<i>bot" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
