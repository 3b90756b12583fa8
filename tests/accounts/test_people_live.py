"""People changes across connections: concurrent demotions and accepts, and a removed person's
open thread socket, through uvicorn with real logins."""

import threading
import time

import pytest
from django.db import connection

from calvin.accounts.invitations import InvitationRefused, invitation_accept, invitation_create
from calvin.workspaces import people as people_services
from calvin.workspaces.models import Member
from calvin.workspaces.people import PeopleRefused, member_role_change
from sessions.services import session_start
from tests.accounts import people_fixtures
from tests.accounts.people_fixtures import PASSWORD, person, role_of
from tests.dashboard.conftest import csrf_token_in, logged_in, ws_connect
from tests.dashboard.test_socket_access import assert_closed_with_4403, assert_still_open

pytestmark = pytest.mark.django_db(transaction=True)
people = people_fixtures.people  # the fixture


def at_once(*calls):
    """Run each call in its own thread (its own database connection), started together; returns
    what each returned or raised."""
    results = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(index, call):
        try:
            start.wait()
            results[index] = call()
        except Exception as exc:  # noqa: BLE001 (the test looks at what each raised)
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.fixture
def slow_owner_count(monkeypatch):
    """Hold each transaction a moment after it counted the owners: without the row locks, both
    would count two owners and both demote."""
    real = people_services._locked

    def counted_then_wait(**kwargs):
        answer = real(**kwargs)
        time.sleep(0.4)
        return answer

    monkeypatch.setattr(people_services, "_locked", counted_then_wait)


def test_two_owners_demoting_each_other_at_once_leave_one_owner(people, slow_owner_count):
    member_role_change(actor=people.ann, member_id=people.ada.id, role="owner")
    results = at_once(
        lambda: member_role_change(actor=people.ann, member_id=people.ada.id, role="member"),
        lambda: member_role_change(actor=people.ada, member_id=people.ann.id, role="member"),
    )
    # The loser, read after the winner's commit, is no owner any more: refused either way.
    assert sum(isinstance(r, PeopleRefused) for r in results) == 1, results
    assert Member.objects.filter(workspace=people.acme, role="owner").count() == 1


def test_two_owners_stepping_down_at_once_leave_one_owner(people, slow_owner_count):
    member_role_change(actor=people.ann, member_id=people.ada.id, role="owner")
    results = at_once(
        lambda: member_role_change(actor=people.ann, member_id=people.ann.id, role="admin"),
        lambda: member_role_change(actor=people.ada, member_id=people.ada.id, role="admin"),
    )
    refused = [r for r in results if isinstance(r, PeopleRefused)]
    assert len(refused) == 1, results
    assert "last owner" in str(refused[0])
    assert Member.objects.filter(workspace=people.acme, role="owner").count() == 1


def test_two_owners_leaving_at_once_leave_one_owner(people, slow_owner_count):
    member_role_change(actor=people.ann, member_id=people.ada.id, role="owner")
    results = at_once(
        lambda: people_services.member_leave(member=people.ann),
        lambda: people_services.member_leave(member=people.ada),
    )
    assert sum(isinstance(r, PeopleRefused) for r in results) == 1, results
    assert Member.objects.filter(workspace=people.acme, role="owner").count() == 1


def test_one_link_accepted_twice_at_once_makes_one_member(people, django_user_model, mailoutbox):
    invitation_create(inviter=people.ada, email="bob@example.com", role="member", base_url="http://testserver/")
    token = people_fixtures.link_token(mailoutbox[0].body)
    bob = person(django_user_model, "bob@example.com")
    results = at_once(
        lambda: invitation_accept(raw_token=token, user=bob), lambda: invitation_accept(raw_token=token, user=bob)
    )
    joined = [r for r in results if not isinstance(r, Exception) and r.joined]
    others = [r for r in results if r not in joined]
    assert len(joined) == 1, results
    # The other one either lost the claim or saw the new membership: never a second row.
    assert isinstance(others[0], InvitationRefused) or others[0].joined is False, results
    assert Member.objects.filter(workspace=people.acme, user=bob).count() == 1


def test_removing_a_person_closes_their_open_thread_page_socket_at_once(people, gateway, settings):
    settings.CALVIN_SOCKET_RECHECK_SECONDS = 600  # the push closes it, not the periodic re-check
    session = session_start(workspace=people.acme, owner=people.mo, title="mo's thread")
    with logged_in(gateway, "mo@acme.example", PASSWORD) as mo, logged_in(gateway, "ann@acme.example", PASSWORD) as ann:
        with ws_connect(gateway, session.thread_id, sessionid=mo.cookies["sessionid"]) as ws:
            assert_still_open(ws)
            page = ann.get("/w/acme/people/")
            response = ann.post(
                f"/w/acme/people/{people.mo.id}/remove/", data={"csrfmiddlewaretoken": csrf_token_in(page.text)}
            )
            assert response.status_code == 302, response.text
            assert_closed_with_4403(ws)
        assert role_of(people.mo) is None
        assert mo.get(f"/threads/{session.thread_id}/").status_code == 404
        assert mo.get("/w/acme/people/").status_code == 404


def test_demoting_a_person_keeps_their_socket_open(people, gateway, settings):
    """A role change is no loss of access: the thread page keeps updating."""
    settings.CALVIN_SOCKET_RECHECK_SECONDS = 600
    session = session_start(workspace=people.acme, owner=people.ada, title="ada's thread")
    with logged_in(gateway, "ada@acme.example", PASSWORD) as ada:
        with ws_connect(gateway, session.thread_id, sessionid=ada.cookies["sessionid"]) as ws:
            member_role_change(actor=people.ann, member_id=people.ada.id, role="member")
            assert_still_open(ws)
        assert ada.get(f"/threads/{session.thread_id}/").status_code == 200


def test_two_admins_inviting_one_address_at_once_make_one_invitation(people, mailoutbox, monkeypatch):
    from calvin.accounts import invitations
    from calvin.accounts.models import Invitation

    real = invitations._daily_limit_check

    def checked_then_wait(workspace):
        real(workspace)
        time.sleep(0.4)  # both have looked for an open invitation and found none

    monkeypatch.setattr(invitations, "_daily_limit_check", checked_then_wait)
    results = at_once(
        lambda: invitation_create(
            inviter=people.ann, email="bob@example.com", role="member", base_url="http://testserver/"
        ),
        lambda: invitation_create(
            inviter=people.ada, email="Bob@example.com", role="admin", base_url="http://testserver/"
        ),
    )
    refused = [r for r in results if isinstance(r, InvitationRefused)]
    assert len(refused) == 1 and "invited just now by someone else" in str(refused[0]), results
    assert Invitation.objects.filter(workspace=people.acme).count() == 1
    assert len(mailoutbox) == 1
