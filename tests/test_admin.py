"""Every model is in the Django admin, its list and search load, and its filters narrow the list."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from calvin.workspaces.services import workspace_create
from sessions.models import Session
from sessions.services import runner_start, session_start
from tools.models import ToolCall

pytestmark = pytest.mark.django_db

CALVIN_APPS = {"workspaces", "agent_sessions", "tools", "approvals", "secrets_vault"}


def calvin_models():
    return [m for m in apps.get_models() if m._meta.app_label in CALVIN_APPS]


def test_every_calvin_model_is_registered():
    missing = [m.__name__ for m in calvin_models() if m not in admin.site._registry]
    assert missing == []


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


@pytest.mark.parametrize("model", calvin_models(), ids=lambda m: m.__name__)
def test_changelist_search_and_every_filter_choice_load(admin_client, workspace, model):
    session = session_start(workspace=workspace, title="seen in admin", prompt="hello")
    runner_start(session=session)
    url = changelist_url(model)
    response = admin_client.get(url)
    assert response.status_code == 200
    assert admin_client.get(url, {"q": "seen"}).status_code == 200
    # Apply each choice each filter offers (its own query string), not just the unfiltered list.
    changelist = response.context["cl"]
    for spec in changelist.filter_specs:
        for choice in spec.choices(changelist):
            assert admin_client.get(url + choice["query_string"]).status_code == 200, choice["query_string"]
    model_admin = admin.site._registry[model]
    assert model_admin.list_display != ("__str__",), f"{model.__name__} needs list columns"


def listed(admin_client, model, **params) -> set:
    response = admin_client.get(changelist_url(model), params)
    assert response.status_code == 200
    return {obj.pk for obj in response.context["cl"].result_list}


def test_filters_and_search_narrow_the_list(admin_client, workspace):
    globex = workspace_create(name="Globex", slug="globex")
    acme_session = session_start(workspace=workspace, title="acme build", prompt="hello")
    globex_session = session_start(workspace=globex, title="globex deploy", prompt="hello")
    Session.objects.filter(id=globex_session.id).update(status=Session.Status.FAILED)
    applied = ToolCall.objects.create(session=acme_session, tool="post_card", status=ToolCall.Status.APPLIED)
    failed = ToolCall.objects.create(session=globex_session, tool="send_file", status=ToolCall.Status.FAILED)

    assert listed(admin_client, Session) == {acme_session.id, globex_session.id}
    assert listed(admin_client, Session, workspace__id__exact=globex.id) == {globex_session.id}
    assert listed(admin_client, Session, status__exact="failed") == {globex_session.id}
    assert listed(admin_client, Session, q="acme") == {acme_session.id}
    assert listed(admin_client, ToolCall) == {applied.id, failed.id}
    assert listed(admin_client, ToolCall, status__exact="applied") == {applied.id}
    assert listed(admin_client, ToolCall, tool="send_file") == {failed.id}


def test_runner_admin_never_shows_a_token(admin_client, workspace):
    session = session_start(workspace=workspace, title="t")
    runner, token = runner_start(session=session)
    page = admin_client.get(reverse("admin:agent_sessions_runner_change", args=[runner.id])).content.decode()
    assert token not in page and runner.token_digest not in page


def test_revoke_action(admin_client, workspace):
    session = session_start(workspace=workspace, title="t")
    runner, _ = runner_start(session=session)
    admin_client.post(
        reverse("admin:agent_sessions_runner_changelist"),
        {"action": "revoke", "_selected_action": [runner.id], "confirmed": "yes"},
    )
    runner.refresh_from_db()
    assert runner.revoked_at is not None
