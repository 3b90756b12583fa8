"""Who may read what through /api/v1/: tokens, cli_scope, and never another workspace."""

from datetime import timedelta

import httpx2
import pytest
from django.utils import timezone

from calvin.api.models import ApiToken
from calvin.api.tokens import api_token_create, api_token_revoke
from calvin.workspaces.models import Agent, Member
from sessions.services import runner_revoke, session_start
from tests.api.conftest import Client, agent_client, member_of

pytestmark = pytest.mark.django_db(transaction=True)


def assert_problem(response, status: int, code: str):
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["status"] == status and body["code"] == code and body["detail"], body
    return body


def test_a_request_without_a_token_or_with_a_bad_one_is_a_401_problem(api_url, workspace):
    assert_problem(httpx2.get(api_url + "/sessions"), 401, "unauthenticated")
    assert_problem(Client(api_url, "cpt_not-a-token").get("/sessions"), 401, "unauthenticated")
    assert_problem(Client(api_url, "cvn_not-a-token").get("/sessions"), 401, "unauthenticated")
    response = httpx2.get(api_url + "/sessions", headers={"Authorization": "Basic b3duZXI6cHc="})
    assert_problem(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_revoked_or_expired_persons_token_is_refused_and_a_live_one_answers(api_url, workspace):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    row, token = api_token_create(member=owner, name="ci")
    assert Client(api_url, token).get("/me").json()["member_id"] == owner.id
    assert ApiToken.objects.get(id=row.id).last_used_at is not None
    assert api_token_revoke(token_id=row.id, member=owner)
    assert_problem(Client(api_url, token).get("/me"), 401, "unauthenticated")

    row, token = api_token_create(member=owner, name="short", expires_at=timezone.now() + timedelta(hours=1))
    assert Client(api_url, token).get("/me").status_code == 200
    ApiToken.objects.filter(id=row.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_problem(Client(api_url, token).get("/me"), 401, "unauthenticated")


def test_a_token_is_stored_only_as_its_digest_and_shown_once(workspace):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    row, token = api_token_create(member=owner, name="laptop")
    stored = ApiToken.objects.filter(id=row.id).values().get()
    assert token not in str(stored) and stored["hint"] == token[:10]


def test_a_member_revokes_only_their_own_tokens_an_admin_any_in_the_workspace(workspace, other_workspace):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    plain = member_of(workspace, "plain")
    theirs, _ = api_token_create(member=owner, name="owner's")
    assert not api_token_revoke(token_id=theirs.id, member=plain)
    stranger = Member.objects.get(workspace=other_workspace, user__username="stranger")
    assert not api_token_revoke(token_id=theirs.id, member=stranger)  # another workspace's owner
    mine, _ = api_token_create(member=plain, name="plain's")
    assert api_token_revoke(token_id=mine.id, member=owner)
    assert ApiToken.objects.get(id=theirs.id).revoked_at is None


def test_an_agent_with_cli_scope_disabled_is_refused_with_the_reason(api_url, workspace):
    agent = agent_client(api_url, workspace, scope=Agent.CliScope.DISABLED)
    body = assert_problem(agent.get("/sessions"), 403, "cli_scope_disabled")
    assert "cli_scope is disabled" in body["detail"]


def test_a_revoked_runners_token_is_refused(api_url, workspace):
    agent = agent_client(api_url, workspace)
    assert agent.get("/me").json()["kind"] == "agent"
    runner_revoke(runner=agent.session.runners.get())
    assert_problem(agent.get("/me"), 401, "unauthenticated")


def test_cli_scope_group_sees_its_own_agent_and_sessions_only(api_url, workspace):
    mine = agent_client(api_url, workspace, name="mine")
    other = agent_client(api_url, workspace, name="other")
    me = mine.get("/me").json()
    assert (me["kind"], me["scope"], me["agent_id"]) == ("agent", "group", mine.agent.id)
    assert [a["id"] for a in mine.get("/agents").json()["items"]] == [mine.agent.id]
    assert [s["id"] for s in mine.get("/sessions").json()["items"]] == [mine.session.id]
    assert_problem(mine.get(f"/agents/{other.agent.id}"), 404, "not_found")
    assert_problem(mine.get(f"/sessions/{other.session.id}"), 404, "not_found")
    assert_problem(mine.get(f"/sessions/{other.session.id}/messages"), 404, "not_found")
    assert_problem(mine.get(f"/agents/{other.agent.id}/destinations"), 404, "not_found")


def test_cli_scope_global_and_a_person_see_the_whole_workspace_never_another(
    api_url, workspace, other_workspace, person
):
    wide = agent_client(api_url, workspace, scope=Agent.CliScope.GLOBAL, name="wide")
    narrow = agent_client(api_url, workspace, name="narrow")
    elsewhere = agent_client(api_url, other_workspace, scope=Agent.CliScope.GLOBAL, name="elsewhere")
    ours = {wide.session.id, narrow.session.id}
    for client in (wide, person):
        assert {s["id"] for s in client.get("/sessions").json()["items"]} == ours
        assert elsewhere.agent.id not in {a["id"] for a in client.get("/agents").json()["items"]}
        assert_problem(client.get(f"/sessions/{elsewhere.session.id}"), 404, "not_found")
        assert_problem(client.get(f"/agents/{elsewhere.agent.id}"), 404, "not_found")
    assert {s["id"] for s in elsewhere.get("/sessions").json()["items"]} == {elsewhere.session.id}
    members = {m["id"] for m in person.get("/members").json()["items"]}
    assert members == set(Member.objects.filter(workspace=workspace).values_list("id", flat=True))


def test_another_workspaces_person_reaches_none_of_this_ones_ids(api_url, workspace, stranger, person):
    agent = agent_client(api_url, workspace)
    ours = person.get(f"/sessions/{agent.session.id}")
    assert ours.status_code == 200 and ours.json()["url"] == f"/threads/{agent.session.thread_id}/"
    for path in (
        f"/sessions/{agent.session.id}",
        f"/sessions/{agent.session.id}/messages",
        f"/agents/{agent.agent.id}",
        f"/agents/{agent.agent.id}/destinations",
    ):
        assert_problem(stranger.get(path), 404, "not_found")
    assert stranger.get("/sessions").json() == {"items": [], "next_cursor": None}
    assert_problem(stranger.post(f"/sessions/{agent.session.id}/stop"), 404, "not_found")


def test_the_audit_log_is_for_admins_and_global_agents(api_url, workspace, person):
    plain = member_of(workspace, "plain")
    _, token = api_token_create(member=plain, name="plain's")
    assert_problem(Client(api_url, token).get("/audit-events"), 403, "admins_only")
    assert_problem(agent_client(api_url, workspace, name="narrow").get("/audit-events"), 403, "admins_only")
    verbs = [e["verb"] for e in person.get("/audit-events").json()["items"]]
    assert "api_token.create" in verbs
    wide = agent_client(api_url, workspace, scope=Agent.CliScope.GLOBAL, name="wide")
    assert wide.get("/audit-events", verb="api_token.create").json()["items"]


def test_lists_page_by_cursor_without_repeats_newest_first(api_url, workspace, person):
    owner = Member.objects.get(workspace=workspace, user__username="owner")
    made = [session_start(workspace=workspace, owner=owner, title=f"s{i}").id for i in range(5)]
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = person.get("/sessions", **params).json()
        assert len(body["items"]) <= 2
        seen += [s["id"] for s in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(made, reverse=True)


def test_malformed_requests_are_problems_never_html(api_url, person):
    assert_problem(person.get("/sessions", limit=0), 422, "invalid")
    assert_problem(person.get("/sessions", limit="many"), 422, "invalid")
    assert_problem(person.get("/sessions", cursor="!!not-ours"), 422, "invalid")
    assert_problem(person.get("/sessions", status="sleeping"), 422, "invalid")
    assert_problem(person.get("/sessions/99999999999999999999999"), 404, "not_found")
    assert_problem(person.get("/nothing-here"), 404, "not_found")
    assert_problem(person.get("/sessions/1/stop"), 405, "method_not_allowed")
    assert_problem(person.get("/tool-calls", tool="send\x00file"), 422, "invalid")
    assert_problem(person.get("/audit-events", verb="approval.\x00"), 422, "invalid")


def test_the_openapi_schema_is_3_1_and_names_every_resource(api_url):
    schema = httpx2.get(api_url + "/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    for resource in ("agents", "sessions", "approvals", "tool-calls", "audit-events", "members"):
        assert f"/api/v1/{resource}" in schema["paths"], sorted(schema["paths"])
