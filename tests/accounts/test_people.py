"""The people page and its rules: role changes, removals, leaving; two workspaces throughout."""

import pytest
from django.test import Client

from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Member
from calvin.workspaces.people import PeopleRefused, member_leave, member_remove, member_role_change
from sessions.services import session_start
from tests.accounts import people_fixtures
from tests.accounts.people_fixtures import member_of, person, role_of

pytestmark = pytest.mark.django_db
people = people_fixtures.people  # the fixture


@pytest.fixture
def as_(client):
    def log_in(member) -> Client:
        client.force_login(member.user)
        return client

    return log_in


def role_post(client, slug, member, role):
    return client.post(f"/w/{slug}/people/{member.id}/role/", {"role": role})


def remove_post(client, slug, member):
    return client.post(f"/w/{slug}/people/{member.id}/remove/")


# --- the page -------------------------------------------------------------------------------------


def test_the_page_lists_the_workspace_people_with_role_and_joined_date(people, as_):
    html = as_(people.mo).get("/w/acme/people/").content.decode()
    for who, role in (("ann@acme.example", "owner"), ("ada@acme.example", "admin"), ("mo@acme.example", "member")):
        assert who in html and f'data-role="{role}"' in html
    assert people.ann.created_at.strftime("%Y-%m-%d") in html
    assert "gus@globex.example" not in html and "gil@globex.example" not in html


def test_each_persons_use_this_month_counts_the_sessions_they_started_in_this_workspace(people, as_):
    from datetime import timedelta
    from decimal import Decimal

    from django.utils import timezone

    from sessions.models import Turn

    now = timezone.now()

    def turns(owner, workspace, *costs, at=now):
        session = session_start(workspace=workspace, owner=owner, title="t")
        for cost in costs:
            turn = Turn.objects.create(session=session, status="done", finished_at=at, agent_seconds=90, cost_usd=cost)
            Turn.objects.filter(id=turn.id).update(batch_id=turn.id)

    turns(people.mo, people.acme, Decimal("1.25"), Decimal("0.50"))
    turns(people.mo, people.acme, Decimal("9"), at=now - timedelta(days=40))  # last month: not this one
    turns(people.ada, people.acme, None)  # a command agent: minutes, no cost
    turns(people.gus, people.globex, Decimal("70"))  # Globex's: never on Acme's page
    html = as_(people.mo).get("/w/acme/people/").content.decode()

    def cell(member):
        return html.split(f'data-member="{member.id}"')[1].split('class="usage">')[1].split("</td>")[0]

    assert cell(people.mo) == "2 turns · 3.0 agent min · $1.75"
    assert cell(people.ada) == "1 turn · 1.5 agent min · no cost reported"
    assert cell(people.ann) == "—"
    assert "$70" not in html


def test_members_see_the_list_only_admins_see_the_forms(people, as_):
    member_page = as_(people.mo).get("/w/acme/people/").content.decode()
    assert 'id="invite"' not in member_page and "Change role" not in member_page and "Remove " not in member_page
    assert "Leave Acme" in member_page
    admin_page = as_(people.ada).get("/w/acme/people/").content.decode()
    assert 'id="invite"' in admin_page and "Change role" in admin_page and "Remove mo@acme.example" in admin_page
    # An admin gets no form for the owner, and no owner choice.
    assert f"/people/{people.ann.id}/role/" not in admin_page and '<option value="owner"' not in admin_page
    owner_page = as_(people.ann).get("/w/acme/people/").content.decode()
    assert '<option value="owner"' in owner_page


def test_another_workspace_people_page_is_not_found_and_logged_out_goes_to_login(people, as_, client):
    assert as_(people.ada).get("/w/globex/people/").status_code == 404
    assert client.get("/w/no-such/people/").status_code == 404
    client.logout()
    response = client.get("/w/acme/people/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


# --- role changes ---------------------------------------------------------------------------------


def test_an_owner_changes_roles_and_each_change_is_recorded(people, as_):
    client = as_(people.ann)
    assert role_post(client, "acme", people.mo, "admin").status_code == 302
    assert role_of(people.mo) == "admin"
    assert role_post(client, "acme", people.ada, "owner").status_code == 302
    assert role_of(people.ada) == "owner"
    events = AuditEvent.objects.filter(verb="member.role_change").order_by("id")
    assert [e.changes["role"] for e in events] == [["member", "admin"], ["admin", "owner"]]
    assert all(e.actor_user_id == people.ann.user_id and e.workspace_id == people.acme.id for e in events)


def test_an_admin_changes_roles_between_admin_and_member(people, as_, django_user_model):
    other_admin = member_of(people.acme, person(django_user_model, "al@acme.example"), Member.Role.ADMIN)
    client = as_(people.ada)
    assert role_post(client, "acme", people.mo, "admin").status_code == 302
    assert role_post(client, "acme", other_admin, "member").status_code == 302
    assert (role_of(people.mo), role_of(other_admin)) == ("admin", "member")


def test_an_admin_cannot_make_an_owner_nor_change_or_remove_one(people, as_):
    client = as_(people.ada)
    for response in (
        role_post(client, "acme", people.mo, "owner"),
        role_post(client, "acme", people.ada, "owner"),
        role_post(client, "acme", people.ann, "member"),
    ):
        assert response.status_code == 403
        assert "Only an owner can make someone an owner or change an owner" in response.content.decode()
    response = remove_post(client, "acme", people.ann)
    assert response.status_code == 403 and "Only an owner can remove an owner" in response.content.decode()
    assert (role_of(people.mo), role_of(people.ada), role_of(people.ann)) == ("member", "admin", "owner")
    assert not AuditEvent.objects.filter(verb__startswith="member.").exists()


def test_a_member_changes_no_role_and_removes_nobody(people, as_, django_user_model):
    other = member_of(people.acme, person(django_user_model, "max@acme.example"), Member.Role.MEMBER)
    client = as_(people.mo)
    assert role_post(client, "acme", other, "admin").status_code == 403
    assert role_post(client, "acme", people.mo, "admin").status_code == 403  # not even their own
    assert remove_post(client, "acme", other).status_code == 403
    assert (role_of(other), role_of(people.mo)) == ("member", "member")


def test_the_last_owner_cannot_be_demoted_but_one_of_two_can(people, as_):
    client = as_(people.ann)
    response = role_post(client, "acme", people.ann, "admin")
    assert response.status_code == 403 and "last owner" in response.content.decode()
    assert role_of(people.ann) == "owner"
    member_role_change(actor=people.ann, member_id=people.ada.id, role="owner")
    assert role_post(client, "acme", people.ann, "admin").status_code == 302
    assert role_of(people.ann) == "admin"
    with pytest.raises(PeopleRefused, match="last owner"):
        member_role_change(actor=people.ada, member_id=people.ada.id, role="member")


@pytest.mark.parametrize("role", ["superuser", "owner\x00", "Owner", "x" * 10_000, ""])
def test_an_unknown_role_is_refused(people, as_, role):
    response = role_post(as_(people.ann), "acme", people.mo, role)
    assert response.status_code == 403 and "Unknown role" in response.content.decode()
    assert role_of(people.mo) == "member"


# --- removing and leaving -----------------------------------------------------------------------


def test_an_admin_removes_a_member_whose_pages_are_gone_at_once(people, as_):
    session = session_start(workspace=people.acme, owner=people.mo, title="mo's work")
    mo = Client()
    mo.force_login(people.mo.user)  # the session cookie mo keeps after removal
    assert mo.get(f"/threads/{session.thread_id}/").status_code == 200
    response = remove_post(as_(people.ada), "acme", people.mo)
    assert response.status_code == 302
    assert role_of(people.mo) is None
    for path in ("/w/acme/people/", f"/threads/{session.thread_id}/", "/w/acme/"):
        assert mo.get(path).status_code == 404, path
    assert mo.post(f"/threads/{session.thread_id}/reply/", {"text": "still here?"}).status_code == 404
    event = AuditEvent.objects.get(verb="member.remove")
    assert event.actor_user_id == people.ada.user_id and event.changes == {"role": ["member", None]}
    assert event.target_label == "mo@acme.example"


def test_an_owner_removes_another_owner_but_not_the_last(people):
    member_role_change(actor=people.ann, member_id=people.ada.id, role="owner")
    member_remove(actor=people.ann, member_id=people.ada.id)
    assert role_of(people.ada) is None
    with pytest.raises(PeopleRefused, match="last owner"):
        member_remove(actor=people.ann, member_id=people.ann.id)


def test_anyone_may_leave_except_the_last_owner(people, as_):
    response = as_(people.mo).post("/w/acme/people/leave/")
    assert response.status_code == 302 and role_of(people.mo) is None
    assert AuditEvent.objects.get(verb="member.leave").actor_user_id == people.mo.user_id
    response = as_(people.ann).post("/w/acme/people/leave/")
    assert response.status_code == 403 and "last owner" in response.content.decode()
    assert role_of(people.ann) == "owner"
    member_role_change(actor=people.ann, member_id=people.ada.id, role="owner")
    member_leave(member=people.ann)
    assert role_of(people.ann) is None


def test_acme_admins_cannot_change_or_remove_globex_people_by_their_ids(people, as_):
    client = as_(people.ada)
    for slug in ("acme", "globex"):  # Globex's ids on Ada's own workspace's URL, and on Globex's
        assert role_post(client, slug, people.gil, "member").status_code == 404
        assert remove_post(client, slug, people.gil).status_code == 404
    assert client.post("/w/globex/people/leave/").status_code == 404
    with pytest.raises(PeopleRefused, match="No such person"):
        member_role_change(actor=people.ada, member_id=people.gil.id, role="member")
    with pytest.raises(PeopleRefused, match="No such person"):
        member_remove(actor=people.ada, member_id=people.gus.id)
    assert (role_of(people.gil), role_of(people.gus)) == ("admin", "owner")


def test_changes_without_the_csrf_token_are_refused(people):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(people.ann.user)
    assert role_post(strict, "acme", people.mo, "admin").status_code == 403
    assert remove_post(strict, "acme", people.mo).status_code == 403
    assert strict.post("/w/acme/people/leave/").status_code == 403
    assert role_of(people.mo) == "member"


def test_the_pages_take_only_posts_for_changes(people, as_):
    client = as_(people.ann)
    assert client.get(f"/w/acme/people/{people.mo.id}/remove/").status_code == 405
    assert client.get(f"/w/acme/people/{people.mo.id}/role/").status_code == 405
    assert role_of(people.mo) == "member"


def test_a_person_demoted_since_the_page_loaded_is_refused(people, as_):
    """The actor's role is read again, locked, inside the change's transaction."""
    stale = Member.objects.get(id=people.ada.id)  # an admin, as the page saw
    Member.objects.filter(id=people.ada.id).update(role=Member.Role.MEMBER)
    with pytest.raises(PeopleRefused, match="Only owners and admins"):
        member_role_change(actor=stale, member_id=people.mo.id, role="admin")
    with pytest.raises(PeopleRefused, match="Only owners and admins"):
        member_remove(actor=stale, member_id=people.mo.id)
    assert role_of(people.mo) == "member"


@pytest.mark.parametrize("member_id", ["0", "99999999999999999999", "9223372036854775808"])
def test_ids_out_of_range_are_not_found(people, as_, member_id):
    client = as_(people.ann)
    assert client.post(f"/w/acme/people/{member_id}/remove/").status_code == 404
    assert client.post(f"/w/acme/people/{member_id}/role/", {"role": "admin"}).status_code == 404
    assert client.post(f"/w/acme/people/invitations/{member_id}/revoke/").status_code == 404
    assert client.post(f"/w/acme/people/invitations/{member_id}/resend/").status_code == 404
