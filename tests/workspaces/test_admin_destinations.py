"""The destination map in the Django admin: inline on the Agent's change form, under the
model's rules (names normalised, `thread` reserved, targets in the agent's own workspace)."""

import pytest
from django.urls import reverse

from calvin.workspaces.models import Destination
from calvin.workspaces.services import agent_create, workspace_create
from sessions.services import session_start

pytestmark = pytest.mark.django_db

INVALID_CHOICE = "Select a valid choice. That choice is not one of the available choices."


def destinations_of(inlines):
    """The destination map's inline among the Agent page's (its approval rules have one too)."""
    (inline,) = [i for i in inlines if i.formset.model is Destination]
    return inline


def post_with_destination(admin_client, agent, **row):
    """The Agent's change form as the admin renders it, posted back with one new destination row."""
    url = reverse("admin:workspaces_agent_change", args=[agent.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()  # as the widget shows it (a JSON field as JSON text)
        if value is not None:
            data[name] = value
    inlines = page.context["inline_admin_formsets"]
    for other in inlines:  # every inline's management form, as a browser sends it (its rows unchanged)
        formset = other.formset
        data.update({f"{formset.prefix}-{key}": value for key, value in formset.management_form.initial.items()})
        data.update({f"{formset.prefix}-MIN_NUM_FORMS": "0", f"{formset.prefix}-MAX_NUM_FORMS": "1000"})
    prefix = destinations_of(inlines).formset.prefix
    data.update({f"{prefix}-TOTAL_FORMS": "1", f"{prefix}-INITIAL_FORMS": "0"})
    data.update({f"{prefix}-0-{key}": value for key, value in row.items()})
    return admin_client.post(url, data)


def form_errors(response) -> list[str]:
    """Every error message the returned change form shows, the agent's and the inline's."""
    assert response.status_code == 200, "the form was accepted"
    inline = destinations_of(response.context["inline_admin_formsets"])
    forms = [response.context["adminform"].form, *inline.formset.forms]
    messages = [m for form in forms for errors in form.errors.values() for m in errors]
    return messages + list(inline.formset.non_form_errors())


@pytest.fixture
def helper(workspace):
    return agent_create(workspace=workspace, name="helper")


@pytest.fixture
def other_workspace():
    return workspace_create(name="Globex", slug="globex")


def test_a_destination_added_inline_is_stored_under_its_normalised_name(admin_client, workspace, helper):
    chat = session_start(workspace=workspace, title="family")
    response = post_with_destination(admin_client, helper, name="Family Chat", thread=chat.thread_id)
    assert response.status_code == 302, form_errors(response)
    stored = Destination.objects.get(agent=helper)
    assert (stored.name, stored.thread_id, stored.target_agent_id) == ("family-chat", chat.thread_id, None)


@pytest.mark.parametrize("name", ["thread", "Thread", " THREAD "])
def test_the_reserved_name_thread_is_refused(admin_client, workspace, helper, name):
    chat = session_start(workspace=workspace, title="family")
    response = post_with_destination(admin_client, helper, name=name, thread=chat.thread_id)
    assert form_errors(response) == ["thread is reserved: it always means the session's own thread"]
    assert not Destination.objects.exists()


def test_another_workspaces_thread_is_refused(admin_client, workspace, other_workspace, helper):
    theirs = session_start(workspace=other_workspace, title="theirs")
    response = post_with_destination(admin_client, helper, name="theirs", thread=theirs.thread_id)
    # Not among the chooser's threads (this agent's workspace's), so not even checked further.
    assert INVALID_CHOICE in form_errors(response)
    assert not Destination.objects.exists()


def test_another_workspaces_agent_is_refused(admin_client, other_workspace, helper):
    stranger = agent_create(workspace=other_workspace, name="stranger")
    response = post_with_destination(admin_client, helper, name="stranger", target_agent=stranger.pk)
    assert INVALID_CHOICE in form_errors(response)
    assert not Destination.objects.exists()
