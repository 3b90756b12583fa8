"""Slack's delivery records in the admin: superusers read them, without what people wrote."""

import pytest

from calvin.chat.models import SlackEvent, SlackLane, SlackPost

pytestmark = pytest.mark.django_db


@pytest.fixture
def records():
    event = SlackEvent.objects.create(
        event_id="EvADMIN1",
        team_id="T0001",
        event_type="app_mention",
        payload={"text": "the private words"},
        status=SlackEvent.Status.IGNORED,
        note="a channel message outside Calvin's threads",
    )
    lane = SlackLane.objects.create(team_id="T0001", channel_id="C0ADMIN")
    post = SlackPost.objects.create(
        lane=lane,
        kind=SlackPost.Kind.MESSAGE,
        status=SlackPost.Status.FAILED,
        payload={"text": "agent words"},
        error="Slack refused chat.postMessage: is_archived",
    )
    return event, post


def test_a_superuser_reads_events_and_posts_without_their_text(admin_client, records):
    event, post = records
    events = admin_client.get("/admin/chat/slackevent/")
    assert events.status_code == 200 and "EvADMIN1" in events.text and "outside Calvin" in events.text
    posts = admin_client.get("/admin/chat/slackpost/")
    assert posts.status_code == 200 and "is_archived" in posts.text
    for page in (
        admin_client.get(f"/admin/chat/slackevent/{event.id}/change/"),
        admin_client.get(f"/admin/chat/slackpost/{post.id}/change/"),
    ):
        assert page.status_code == 200
        assert "the private words" not in page.text and "agent words" not in page.text
    assert admin_client.post(f"/admin/chat/slackpost/{post.id}/delete/", {"post": "yes"}).status_code == 403


def test_staff_who_are_not_superusers_do_not_see_them(client, django_user_model, records):
    staff = django_user_model.objects.create_user("staff", password="pw-staff-123", is_staff=True)
    client.force_login(staff)
    # The staff flag alone opens nothing: the admin sends them to its login page.
    for url in ("/admin/chat/slackevent/", "/admin/chat/slackpost/"):
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/admin/login/")
