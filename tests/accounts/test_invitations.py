"""Invitations: invite by email with a role, resend, revoke, and the link's page that accepts.

Two workspaces throughout: Acme's admins cannot touch Globex's invitations by their ids.
"""

import hashlib
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from calvin.accounts.invitations import InvitationRefused, invitation_accept, invitation_create
from calvin.accounts.models import Invitation
from calvin.audit.models import AuditEvent
from calvin.workspaces.models import Member
from tests.accounts import people_fixtures
from tests.accounts.people_fixtures import link_token, person

pytestmark = pytest.mark.django_db
people = people_fixtures.people  # the fixture


@pytest.fixture
def send(django_capture_on_commit_callbacks, mailoutbox):
    """Run a callable and the emails it queues for after its commit; returns its result."""

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return run


@pytest.fixture
def as_(client):
    def log_in(member_or_user) -> Client:
        user = getattr(member_or_user, "user", member_or_user)
        client.force_login(user)
        return client

    return log_in


def invite(send, inviter, email="bob@example.com", role="member"):
    return send(invitation_create, inviter=inviter, email=email, role=role, base_url="http://testserver/")


def sent_a_while_ago() -> None:
    """Resends are limited to one a minute per invitation."""
    Invitation.objects.update(sent_at=timezone.now() - timedelta(minutes=2))


def post_invite(send, client, slug, email, role="member"):
    return send(client.post, f"/w/{slug}/people/invite/", {"email": email, "role": role})


# --- inviting -----------------------------------------------------------------------------------


def test_an_admin_invites_and_the_email_names_the_workspace_the_inviter_and_the_link(people, send, mailoutbox):
    outcome = invite(send, people.ada, "Ｂob@Example.COM", "admin")  # a full-width Ｂ: NFKC, as sign-up
    assert outcome.status == "invited"
    invitation = Invitation.objects.get()
    assert (invitation.workspace, invitation.email, invitation.role) == (people.acme, "bob@example.com", "admin")
    assert invitation.invited_by == people.ada
    assert invitation.expires_at - invitation.created_at == timedelta(days=7)
    [email] = mailoutbox
    assert email.to == ["bob@example.com"]
    assert "ada@acme.example" in email.subject and "Acme" in email.subject
    assert "as admin" in email.body
    token = link_token(email.body)
    assert f"http://testserver/invite/{token}/" in email.body
    # Only the digest is kept: a database read hands out no working link.
    assert invitation.token_digest == hashlib.sha256(token.encode()).hexdigest()
    assert not Invitation.objects.filter(token_digest=token).exists()
    event = AuditEvent.objects.get(verb="member.invite")
    assert event.workspace_id == people.acme.id and event.actor_user_id == people.ada.user_id
    assert event.changes == {"email": [None, "bob@example.com"], "role": [None, "admin"]}
    assert token not in str(event.changes)


def test_the_link_uses_calvin_public_url_when_it_is_set(people, send, mailoutbox, settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.org"
    invite(send, people.ann)
    assert "https://calvin.example.org/invite/" in mailoutbox[0].body


def test_the_invite_form_sends_the_request_host_link(people, send, as_, mailoutbox):
    response = post_invite(send, as_(people.ann), "acme", "carol@example.com")
    assert response.status_code == 302 and response["Location"] == "/w/acme/people/"
    assert "http://testserver/invite/" in mailoutbox[0].body


@pytest.mark.parametrize(
    "email, reason",
    [
        ("bob\x00@example.com", "NUL"),
        ("b" * 290 + "@example.com", "at most 254"),
        ("bob@evil@example.com", "not one valid email"),
        ("bob@exаmple.com", "ASCII"),  # Cyrillic а
        ("bоb@example.com", "ASCII"),  # Cyrillic о
        ("", "Give an email"),
        ("bob", "not one valid email"),
    ],
)
def test_hostile_addresses_are_refused_with_the_reason_and_nothing_is_made(
    people, send, as_, mailoutbox, email, reason
):
    with pytest.raises(InvitationRefused, match=reason):
        invite(send, people.ada, email)
    response = post_invite(send, as_(people.ada), "acme", email)
    assert response.status_code == 400
    assert reason in response.content.decode()
    assert not Invitation.objects.exists() and not mailoutbox


def test_a_member_cannot_invite(people, send, as_, mailoutbox):
    with pytest.raises(InvitationRefused, match="Only owners and admins") as refused:
        invite(send, people.mo)
    assert refused.value.status == 403
    assert post_invite(send, as_(people.mo), "acme", "bob@example.com").status_code == 403
    assert not Invitation.objects.exists() and not mailoutbox


def test_only_an_owner_invites_an_owner(people, send):
    with pytest.raises(InvitationRefused, match="Only an owner can invite an owner"):
        invite(send, people.ada, role="owner")
    assert invite(send, people.ann, role="owner").invitation.role == "owner"


@pytest.mark.parametrize("role", ["superuser", "owner\x00", "x" * 5000, ""])
def test_an_unknown_role_is_refused(people, send, role):
    with pytest.raises(InvitationRefused, match="Unknown role"):
        invite(send, people.ann, role=role)
    assert not Invitation.objects.exists()


def test_re_inviting_an_existing_member_changes_nothing_and_says_so(people, send, as_, mailoutbox):
    outcome = invite(send, people.ada, "MO@acme.example", "admin")
    assert outcome.status == "already_member" and "already a member" in outcome.message
    response = post_invite(send, as_(people.ada), "acme", "Mo@Acme.Example", "admin")
    assert response.status_code == 302
    assert "already a member" in as_(people.ada).get("/w/acme/people/").content.decode()
    assert people.mo.__class__.objects.get(id=people.mo.id).role == "member"
    assert not Invitation.objects.exists() and not mailoutbox
    assert not AuditEvent.objects.filter(verb__in=["member.invite", "invitation.resend"]).exists()


def test_re_inviting_an_open_invitation_resends_it_and_the_old_link_dies(people, send, mailoutbox, client):
    first = invite(send, people.ada).invitation
    old_token = link_token(mailoutbox[0].body)
    sent_a_while_ago()
    outcome = invite(send, people.ann, "BOB@example.com", "admin")
    assert outcome.status == "resent" and outcome.invitation.id == first.id
    assert Invitation.objects.count() == 1 and Invitation.objects.get().role == "admin"
    new_token = link_token(mailoutbox[1].body)
    assert new_token != old_token
    assert client.get(f"/invite/{old_token}/").status_code == 404
    assert client.get(f"/invite/{new_token}/").status_code == 200
    event = AuditEvent.objects.get(verb="invitation.resend")
    assert event.changes["role"] == ["member", "admin"]


def test_the_one_open_invitation_per_address_is_a_database_rule(people):
    Invitation.objects.create(
        workspace=people.acme, email="bob@example.com", role="member", token_digest="a" * 64, expires_at=timezone.now()
    )
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Invitation.objects.create(
            workspace=people.acme,
            email="bob@example.com",
            role="member",
            token_digest="b" * 64,
            expires_at=timezone.now(),
        )
    # Another workspace, or once the first is revoked: allowed.
    Invitation.objects.create(
        workspace=people.globex,
        email="bob@example.com",
        role="member",
        token_digest="c" * 64,
        expires_at=timezone.now(),
    )
    Invitation.objects.filter(token_digest="a" * 64).update(revoked_at=timezone.now())
    Invitation.objects.create(
        workspace=people.acme, email="bob@example.com", role="member", token_digest="d" * 64, expires_at=timezone.now()
    )


# --- resend and revoke, and another workspace's ids -------------------------------------------------


def test_resend_gives_a_new_link_and_expiry_and_the_old_link_dies(people, send, as_, mailoutbox, client):
    invitation = invite(send, people.ada).invitation
    Invitation.objects.filter(id=invitation.id).update(
        expires_at=timezone.now() - timedelta(days=1), sent_at=timezone.now() - timedelta(days=8)
    )
    old_token = link_token(mailoutbox[0].body)
    assert client.get(f"/invite/{old_token}/").status_code == 410  # expired
    response = send(as_(people.ada).post, f"/w/acme/people/invitations/{invitation.id}/resend/")
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.expires_at > timezone.now() + timedelta(days=6)
    new_token = link_token(mailoutbox[1].body)
    client.logout()
    assert client.get(f"/invite/{old_token}/").status_code == 404
    assert client.get(f"/invite/{new_token}/").status_code == 200
    assert AuditEvent.objects.filter(verb="invitation.resend", workspace=people.acme).count() == 1


def test_an_admin_cannot_resend_or_rewrite_an_owner_invitation(people, send, as_, mailoutbox):
    invitation = invite(send, people.ann, role="owner").invitation
    sent_a_while_ago()
    response = send(as_(people.ada).post, f"/w/acme/people/invitations/{invitation.id}/resend/")
    assert response.status_code == 403 and "Only an owner" in response.content.decode()
    response = post_invite(send, as_(people.ada), "acme", "bob@example.com", "member")  # a re-invite
    assert response.status_code == 403 and "Only an owner" in response.content.decode()
    assert Invitation.objects.get().role == "owner" and len(mailoutbox) == 1


def test_revoke_kills_the_link_and_is_recorded(people, send, as_, mailoutbox, client):
    invitation = invite(send, people.ada).invitation
    token = link_token(mailoutbox[0].body)
    response = as_(people.ann).post(f"/w/acme/people/invitations/{invitation.id}/revoke/")
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None
    assert AuditEvent.objects.get(verb="invitation.revoke").target_id == str(invitation.id)
    again = client.post(f"/w/acme/people/invitations/{invitation.id}/revoke/")
    assert again.status_code == 409 and "already revoked" in again.content.decode()
    client.logout()
    page = client.get(f"/invite/{token}/")
    assert page.status_code == 410 and "revoked" in page.content.decode()


def test_a_member_cannot_revoke_or_resend(people, send, as_, mailoutbox):
    invitation = invite(send, people.ada).invitation
    sent_a_while_ago()
    client = as_(people.mo)
    assert client.post(f"/w/acme/people/invitations/{invitation.id}/revoke/").status_code == 403
    assert send(client.post, f"/w/acme/people/invitations/{invitation.id}/resend/").status_code == 403
    invitation.refresh_from_db()
    assert invitation.revoked_at is None and len(mailoutbox) == 1


def test_an_admin_of_acme_cannot_invite_into_revoke_or_resend_in_globex(people, send, as_, mailoutbox):
    theirs = invite(send, people.gil, "vic@example.com").invitation
    client = as_(people.ada)
    assert post_invite(send, client, "globex", "eve@example.com").status_code == 404
    for action in ("revoke", "resend"):
        # Globex's id on Globex's URL (not Ada's workspace) and on Acme's URL (not Acme's invitation).
        assert send(client.post, f"/w/globex/people/invitations/{theirs.id}/{action}/").status_code == 404
        assert send(client.post, f"/w/acme/people/invitations/{theirs.id}/{action}/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None and len(mailoutbox) == 1
    assert list(Invitation.objects.values_list("email", flat=True)) == ["vic@example.com"]
    assert "vic@example.com" not in client.get("/w/acme/people/").content.decode()


def test_posts_without_the_csrf_token_are_refused(people, send, mailoutbox):
    invitation = invite(send, people.ada).invitation
    token = link_token(mailoutbox[0].body)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(people.ada.user)
    assert strict.post("/w/acme/people/invite/", {"email": "x@example.com", "role": "member"}).status_code == 403
    assert strict.post(f"/w/acme/people/invitations/{invitation.id}/revoke/").status_code == 403
    assert strict.post(f"/w/acme/people/invitations/{invitation.id}/resend/").status_code == 403
    bob = Client(enforce_csrf_checks=True)
    bob.force_login(person(Member._meta.get_field("user").related_model, "bob@example.com"))
    assert bob.post(f"/invite/{token}/").status_code == 403
    assert Invitation.objects.filter(revoked_at=None, accepted_at=None).count() == 1
    assert not Member.objects.filter(user__email="bob@example.com").exists()


# --- the link's page and accepting ------------------------------------------------------------------


@pytest.fixture
def bob_invited(people, send, mailoutbox):
    invite(send, people.ada, "bob@example.com", "admin")
    return link_token(mailoutbox[-1].body)


def test_logged_out_the_page_names_inviter_workspace_role_and_offers_sign_up_and_log_in(people, bob_invited, client):
    page = client.get(f"/invite/{bob_invited}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "ada@acme.example invited you to Acme as admin" in html
    assert f"/accounts/login/?next=%2Finvite%2F{bob_invited}%2F" in html
    assert 'id="signup"' in html
    # Accepting needs a login.
    response = client.post(f"/invite/{bob_invited}/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")
    assert not Member.objects.filter(user__email="bob@example.com").exists()


def test_the_invited_person_accepts_in_any_case_and_joins_with_the_role(people, bob_invited, client, django_user_model):
    bob = person(django_user_model, "Bob@Example.com")
    client.force_login(bob)
    page = client.get(f"/invite/{bob_invited}/")
    assert "Accept and join Acme" in page.content.decode()
    response = client.post(f"/invite/{bob_invited}/")
    assert response.status_code == 302 and response["Location"] == "/w/acme/"
    assert client.session["calvin_workspace"] == people.acme.id  # "/" brings them back there
    member = Member.objects.get(user=bob)
    assert (member.workspace, member.role) == (people.acme, "admin")
    invitation = Invitation.objects.get()
    assert invitation.accepted_by == bob and invitation.accepted_at is not None
    event = AuditEvent.objects.get(verb="member.join")
    assert event.workspace_id == people.acme.id and event.changes["role"] == [None, "admin"]
    assert client.get("/w/acme/people/").status_code == 200


def test_a_link_works_once(people, bob_invited, client, django_user_model):
    client.force_login(person(django_user_model, "bob@example.com"))
    assert client.post(f"/invite/{bob_invited}/").status_code == 302
    again = client.post(f"/invite/{bob_invited}/")
    assert again.status_code == 410 and "already used" in again.content.decode()
    assert client.get(f"/invite/{bob_invited}/").status_code == 410
    assert Member.objects.filter(user__email="bob@example.com").count() == 1
    assert AuditEvent.objects.filter(verb="member.join").count() == 1


def test_the_single_use_is_the_conditional_update_not_the_first_read(people, bob_invited, django_user_model):
    """Read as open, then used elsewhere before the claim: the UPDATE changes no row, nothing is made."""
    bob = person(django_user_model, "bob@example.com")
    from calvin.accounts import invitations

    real = invitations.invitation_state_problem

    def used_meanwhile(invitation):
        answer = real(invitation)
        Invitation.objects.filter(id=invitation.id).update(accepted_at=timezone.now())
        return answer

    invitations.invitation_state_problem = used_meanwhile
    try:
        with pytest.raises(InvitationRefused, match="already used"):
            invitation_accept(raw_token=bob_invited, user=bob)
    finally:
        invitations.invitation_state_problem = real
    assert not Member.objects.filter(user=bob).exists()


def test_an_expired_link_is_refused_and_changes_nothing(people, bob_invited, client, django_user_model):
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    client.force_login(person(django_user_model, "bob@example.com"))
    for response in (client.get(f"/invite/{bob_invited}/"), client.post(f"/invite/{bob_invited}/")):
        assert response.status_code == 410 and "expired" in response.content.decode()
    assert not Member.objects.filter(user__email="bob@example.com").exists()
    assert Invitation.objects.get().accepted_at is None


def test_a_link_forwarded_to_someone_else_is_refused_with_the_reason(people, bob_invited, client, django_user_model):
    client.force_login(person(django_user_model, "carol@example.com"))
    page = client.get(f"/invite/{bob_invited}/").content.decode()
    assert "logged in as <strong>carol@example.com</strong>" in page and "Log out" in page
    assert "Accept and join" not in page
    response = client.post(f"/invite/{bob_invited}/")
    assert response.status_code == 403
    assert "This invitation is for bob@example.com" in response.content.decode()
    assert not Member.objects.filter(workspace=people.acme, user__email="carol@example.com").exists()
    assert Invitation.objects.get().accepted_at is None


def test_an_account_whose_email_is_not_verified_cannot_accept(people, bob_invited, django_user_model):
    bob = person(django_user_model, "bob@example.com", active=False)
    with pytest.raises(InvitationRefused) as refused:
        invitation_accept(raw_token=bob_invited, user=bob)
    assert refused.value.status == 403
    assert not Member.objects.filter(user=bob).exists()


def test_accepting_when_already_a_member_changes_nothing(people, bob_invited, client, django_user_model):
    bob = person(django_user_model, "bob@example.com")
    Member.objects.create(workspace=people.acme, user=bob, role=Member.Role.MEMBER)
    client.force_login(bob)
    response = client.post(f"/invite/{bob_invited}/", follow=True)
    assert "already a member of Acme" in response.content.decode()
    assert Member.objects.get(user=bob).role == "member"
    assert not AuditEvent.objects.filter(verb="member.join").exists()


@pytest.mark.parametrize(
    "token",
    ["nope", "A" * 43, "A" * 500, "abc%00defghijklmnopqrstuvwxyz", "ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔ"],
)
def test_unknown_and_hostile_tokens_get_a_clear_404(people, bob_invited, client, token):
    response = client.get(f"/invite/{token}/")
    assert response.status_code == 404 and "not valid" in response.content.decode()
    assert client.post(f"/invite/{token}/").status_code == 404


def test_a_link_used_on_another_workspace_url_is_not_found(people, bob_invited, client, django_user_model):
    client.force_login(person(django_user_model, "bob@example.com"))
    assert client.get(f"/w/globex/invite/{bob_invited}/").status_code == 404
    assert client.post(f"/w/globex/invite/{bob_invited}/").status_code == 404
    assert not Member.objects.filter(user__email="bob@example.com").exists()
    assert client.get(f"/w/acme/invite/{bob_invited}/").status_code == 200
    assert client.post(f"/w/acme/invite/{bob_invited}/").status_code == 302
    assert Member.objects.get(user__email="bob@example.com").workspace == people.acme


def test_a_resend_between_the_read_and_the_claim_kills_the_link_being_accepted(people, bob_invited, django_user_model):
    bob = person(django_user_model, "bob@example.com")
    from calvin.accounts import invitations

    real = invitations.invitation_state_problem

    def resent_meanwhile(invitation):
        Invitation.objects.filter(id=invitation.id).update(token_digest="f" * 64)
        return real(invitation)

    invitations.invitation_state_problem = resent_meanwhile
    try:
        with pytest.raises(InvitationRefused, match="not valid"):
            invitation_accept(raw_token=bob_invited, user=bob)
    finally:
        invitations.invitation_state_problem = real
    assert not Member.objects.filter(user=bob).exists()


def test_an_accepted_invitation_is_neither_revoked_nor_resent(people, bob_invited, as_, send, mailoutbox):
    bob = person(Member._meta.get_field("user").related_model, "bob@example.com")
    invitation_accept(raw_token=bob_invited, user=bob)
    invitation = Invitation.objects.get()
    client = as_(people.ann)
    for action in ("revoke", "resend"):
        response = send(client.post, f"/w/acme/people/invitations/{invitation.id}/{action}/")
        assert response.status_code == 409 and "already accepted" in response.content.decode()
    invitation.refresh_from_db()
    assert invitation.revoked_at is None and len(mailoutbox) == 1


def test_resending_is_limited_to_once_a_minute(people, send, as_, mailoutbox):
    invitation = invite(send, people.ada).invitation
    response = send(as_(people.ada).post, f"/w/acme/people/invitations/{invitation.id}/resend/")
    assert response.status_code == 429 and "less than a minute ago" in response.content.decode()
    with pytest.raises(InvitationRefused, match="less than a minute ago"):
        invite(send, people.ann)  # a re-invite is a resend too
    assert len(mailoutbox) == 1
    sent_a_while_ago()
    assert send(as_(people.ada).post, f"/w/acme/people/invitations/{invitation.id}/resend/").status_code == 302
    assert len(mailoutbox) == 2


def test_a_workspace_makes_at_most_the_daily_number_of_invitations(people, send, mailoutbox, settings):
    settings.CALVIN_INVITATIONS_PER_DAY = 2
    invite(send, people.ada, "one@example.com")
    invite(send, people.ada, "two@example.com")
    with pytest.raises(InvitationRefused, match="CALVIN_INVITATIONS_PER_DAY=2") as refused:
        invite(send, people.ann, "three@example.com")
    assert refused.value.status == 429
    invite(send, people.gil, "three@example.com")  # another workspace counts its own
    Invitation.objects.filter(workspace=people.acme).update(created_at=timezone.now() - timedelta(days=1, seconds=1))
    invite(send, people.ada, "three@example.com")
    assert len(mailoutbox) == 4


def test_an_invited_person_with_an_account_logs_in_and_comes_back_to_accept(people, bob_invited, django_user_model):
    person(django_user_model, "bob@example.com")
    client = Client()
    page = client.get(f"/invite/{bob_invited}/").content.decode()
    login = re.search(r'id="login" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    response = client.post(login, {"username": "bob@example.com", "password": people_fixtures.PASSWORD})
    assert response.status_code == 302 and response["Location"] == f"/invite/{bob_invited}/"
    assert client.post(response["Location"]).status_code == 302
    assert Member.objects.get(user__username="bob@example.com").role == "admin"


def test_someone_else_logs_out_from_the_page_and_comes_back_to_it(people, bob_invited, django_user_model):
    client = Client()
    client.force_login(person(django_user_model, "carol@example.com"))
    response = client.post("/accounts/logout/", {"next": f"/invite/{bob_invited}/"})
    assert response.status_code == 302 and response["Location"] == f"/invite/{bob_invited}/"
    assert 'id="signup"' in client.get(response["Location"]).content.decode()


def test_names_with_line_breaks_stay_out_of_the_email_headers(people, send, mailoutbox):
    Member.objects.filter(id=people.ada.id).update(display_name="Ada\r\nBcc: victim@example.com")
    invite(send, people.ada)
    [email] = mailoutbox
    assert "\n" not in email.subject and "\r" not in email.subject
    assert email.bcc == [] and email.message()["Bcc"] is None
    assert "Ada Bcc: victim@example.com" in email.subject  # kept as text, on one line
