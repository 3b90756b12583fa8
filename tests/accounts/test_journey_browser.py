"""The team journey in Debian's Chromium against uvicorn, every link read from the email outbox:
sign up -> verify -> create a workspace -> invite a colleague -> the colleague signs up through
the invitation -> both see only that workspace -> the owner demotes, then removes the colleague,
whose open thread page stops updating at once."""

import re
from pathlib import Path

import pytest
from django.core import mail
from playwright.sync_api import expect

from calvin.dashboard.events import thread_broadcast
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from sessions.models import Message, Thread
from sessions.services import session_start
from tests.accounts.signup_steps import STRONG_PASSWORD, resend_limits_forget
from tests.dashboard.conftest import browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"h3-{name}.png"), full_page=True)


def email_to(address: str, subject_part: str):
    sent = [m for m in mail.outbox if m.to == [address] and subject_part in m.subject]
    assert sent, f"no {subject_part!r} email to {address}: {[(m.to, m.subject) for m in mail.outbox]}"
    return sent[-1]


def link_of(message) -> str:
    (url,) = re.findall(r"https?://\S+", message.body)
    return url


def verify_from_inbox(page, address: str) -> None:
    page.goto(link_of(email_to(address, "Verify")))
    page.click("button:text-is('Verify and log in')")


def agent_says(thread_id: int, text: str) -> None:
    thread_broadcast(Message.objects.create(thread_id=thread_id, author=Message.Author.AGENT, text=text))


@pytest.fixture
def pages(browser):  # noqa: F811 (fixture)
    """Two people, two browser contexts (two cookie jars)."""
    contexts = [browser.new_context(), browser.new_context()]
    made = [context.new_page() for context in contexts]
    violations = []
    for page in made:
        page.set_default_timeout(15_000)
        page.on("console", lambda m: violations.append(m.text) if "Content Security" in m.text else None)
    yield made
    assert violations == [], violations  # the pages work under the content security policy
    for context in contexts:
        context.close()


def test_a_team_signs_up_invites_and_removes_a_colleague(gateway, pages, django_user_model, settings):
    settings.CALVIN_SOCKET_RECHECK_SECONDS = 600  # the removal's push closes the socket, not the re-check
    resend_limits_forget()
    ann, bob = pages
    # Another tenant, with a thread of its own: nothing of it may show to Ann or Bob.
    gus = django_user_model.objects.create_user("gus@globex.example", email="gus@globex.example", password="x-Pw-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=gus)
    session_start(workspace=globex, owner=Member.objects.get(user=gus), prompt="Globex secret plan")

    # Ann signs up, verifies her email and creates Acme.
    ann.goto(f"{gateway}/accounts/signup/")
    ann.fill("#id_email", "ann@acme.example")
    ann.fill("#id_password1", STRONG_PASSWORD)
    ann.fill("#id_password2", STRONG_PASSWORD)
    ann.click("button:text-is('Create the account')")
    expect(ann.locator("#check-inbox h2")).to_have_text("Check your inbox")
    verify_from_inbox(ann, "ann@acme.example")
    expect(ann).to_have_url(f"{gateway}/workspaces/new/")
    ann.fill("#id_name", "Acme")
    ann.fill("#id_slug", "acme")
    ann.click("button:text-is('Create')")
    expect(ann).to_have_url(f"{gateway}/w/acme/")

    # Ann invites Bob as an admin from the People page.
    ann.click("#people-link")
    expect(ann).to_have_url(f"{gateway}/w/acme/people/")
    ann.fill("#invite-email", "Bob@Acme.example")
    ann.select_option("#invite-role", "admin")
    ann.click("#invite button:text-is('Invite')")
    expect(ann.locator("#notices")).to_contain_text("bob@acme.example is invited as admin")
    expect(ann.locator("#invitations")).to_contain_text("bob@acme.example")
    shot(ann, "people-owner")

    # Bob opens the invitation logged out, signs up through it, verifies, and comes back to accept.
    invitation = email_to("bob@acme.example", "invited you to Acme")
    assert "ann@acme.example" in invitation.subject
    bob.goto(link_of(invitation))
    expect(bob.locator("#invitation h2")).to_have_text("ann@acme.example invited you to Acme as admin")
    shot(bob, "invite-logged-out")
    bob.click("#signup")
    expect(bob.locator("#id_email")).to_have_value("bob@acme.example")
    bob.fill("#id_password1", STRONG_PASSWORD)
    bob.fill("#id_password2", STRONG_PASSWORD)
    bob.click("button:text-is('Create the account')")
    expect(bob.locator("#check-inbox h2")).to_have_text("Check your inbox")
    verify_from_inbox(bob, "bob@acme.example")
    expect(bob.locator("#invitation h2")).to_have_text("ann@acme.example invited you to Acme as admin")
    shot(bob, "invite-accept")
    bob.click("button:text-is('Accept and join Acme')")
    expect(bob).to_have_url(f"{gateway}/w/acme/")
    expect(bob.locator("main")).to_contain_text("you joined as admin")

    # Both see Acme and only Acme.
    for page in (ann, bob):
        page.goto(f"{gateway}/")
        expect(page).to_have_url(f"{gateway}/w/acme/")
        page.click("#current-workspace")
        expect(page.locator("#workspace-switcher li a")).to_have_text(["Acme", "New workspace…"])
        expect(page.locator("main")).not_to_contain_text("Globex")
        assert page.goto(f"{gateway}/w/globex/").status == 404

    # Ann starts a session; Bob watches its thread page live.
    ann.goto(f"{gateway}/w/acme/")
    ann.fill("textarea[name=prompt]", "Tidy the release notes")
    ann.click("button:text-is('Start')")
    expect(ann).to_have_url(re.compile(r"/threads/\d+/$"))
    thread = Thread.objects.get(workspace__slug="acme")
    bob.goto(f"{gateway}/threads/{thread.id}/")
    expect(bob.locator("#live-status")).to_have_attribute("data-state", "live")
    agent_says(thread.id, "First draft is ready")
    expect(bob.locator("#messages")).to_contain_text("First draft is ready")

    # Ann demotes Bob: his page keeps updating.
    bob_member = Member.objects.get(user__username="bob@acme.example")
    ann.goto(f"{gateway}/w/acme/people/")
    ann.select_option(f"#role-{bob_member.id}", "member")
    ann.click(f"tr[data-member='{bob_member.id}'] button:text-is('Change role')")
    expect(ann.locator("#notices")).to_contain_text("bob@acme.example is now member of Acme")
    expect(ann.locator(f"tr[data-member='{bob_member.id}'] td[data-role]")).to_have_text("member")
    agent_says(thread.id, "Second draft is ready")
    expect(bob.locator("#messages")).to_contain_text("Second draft is ready")
    # As a member Bob sees the people, not the forms.
    bob.goto(f"{gateway}/w/acme/people/")
    expect(bob.locator("#people")).to_contain_text("ann@acme.example")
    expect(bob.locator("#invite")).to_have_count(0)
    expect(bob.locator("#invitations")).to_have_count(0)
    shot(bob, "people-member")
    bob.goto(f"{gateway}/threads/{thread.id}/")
    expect(bob.locator("#live-status")).to_have_attribute("data-state", "live")

    # Ann removes Bob: his thread page stops updating at once, his pages 404.
    ann.click(f"tr[data-member='{bob_member.id}'] summary:text-is('Remove…')")
    shot(ann, "people-remove-confirm")
    ann.click(f"tr[data-member='{bob_member.id}'] button:text-is('Remove bob@acme.example')")
    expect(ann.locator("#notices")).to_contain_text("bob@acme.example is removed from Acme")
    expect(ann.locator("#people")).not_to_contain_text("bob@acme.example")
    expect(bob.locator("#live-status")).to_have_attribute("data-state", "refused")
    agent_says(thread.id, "Final draft, for members only")
    expect(ann.locator("#people")).to_be_visible()
    ann.goto(f"{gateway}/threads/{thread.id}/")
    expect(ann.locator("#messages")).to_contain_text("Final draft, for members only")
    expect(bob.locator("#messages")).not_to_contain_text("Final draft")
    shot(bob, "thread-after-removal")
    assert bob.goto(f"{gateway}/threads/{thread.id}/").status == 404
    assert bob.goto(f"{gateway}/w/acme/people/").status == 404
    assert not Member.objects.filter(user__username="bob@acme.example").exists()
