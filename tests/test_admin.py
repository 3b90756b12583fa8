"""Every model is in the Django admin, and its list, search and filters work."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from sessions.services import runner_start, session_start

pytestmark = pytest.mark.django_db

CALVIN_APPS = {"workspaces", "agent_sessions", "tools", "approvals", "secrets_vault"}


def calvin_models():
    return [m for m in apps.get_models() if m._meta.app_label in CALVIN_APPS]


def test_every_calvin_model_is_registered():
    missing = [m.__name__ for m in calvin_models() if m not in admin.site._registry]
    assert missing == []


@pytest.mark.parametrize("model", calvin_models(), ids=lambda m: m.__name__)
def test_changelist_search_and_filters_load(admin_client, workspace, model):
    session = session_start(workspace=workspace, title="seen in admin", prompt="hello")
    runner_start(session=session)
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert admin_client.get(url).status_code == 200
    assert admin_client.get(url, {"q": "seen"}).status_code == 200
    model_admin = admin.site._registry[model]
    assert model_admin.list_display != ("__str__",), f"{model.__name__} needs list columns"


def test_runner_admin_never_shows_a_token(admin_client, workspace):
    session = session_start(workspace=workspace, title="t")
    runner, token = runner_start(session=session)
    page = admin_client.get(reverse("admin:agent_sessions_runner_change", args=[runner.id])).content.decode()
    assert token not in page and runner.token_digest not in page


def test_revoke_action(admin_client, workspace):
    session = session_start(workspace=workspace, title="t")
    runner, _ = runner_start(session=session)
    admin_client.post(
        reverse("admin:agent_sessions_runner_changelist"), {"action": "revoke", "_selected_action": [runner.id]}
    )
    runner.refresh_from_db()
    assert runner.revoked_at is not None
