"""Secrets in the Django admin: set, replaced and deleted at the workspace's and an agent's
place through a write-only value, never shown back; a staff user manages only the
workspaces they own or administer."""

import base64

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse

from calvin.workspaces.models import Member
from calvin.workspaces.services import agent_create, workspace_create
from secrets_vault.models import MAX_VALUE_BYTES, Secret, SecretRequest
from secrets_vault.services import _plain, secret_put, secret_set
from sessions.services import session_start
from tools.models import ToolCall

pytestmark = pytest.mark.django_db

VALUE = "ghp_admin-typed-value-0123456789"
NEW_VALUE = "ghp_replaced-value-9876543210"
GLOBEX_VALUE = "globex-only-value-55aa"

ADD = reverse("admin:secrets_vault_secret_add")
LIST = reverse("admin:secrets_vault_secret_changelist")


def change_url(secret) -> str:
    return reverse("admin:secrets_vault_secret_change", args=[secret.id])


def delete_url(secret) -> str:
    return reverse("admin:secrets_vault_secret_delete", args=[secret.id])


@pytest.fixture
def agent(workspace):
    return agent_create(workspace=workspace, name="builder")


@pytest.fixture
def globex(django_user_model):
    return workspace_create(name="Globex", slug="globex", owner_user=django_user_model.objects.create_user("gus"))


@pytest.fixture
def globex_agent(globex):
    return agent_create(workspace=globex, name="deployer")


@pytest.fixture
def globex_secret(vault, globex):
    return secret_put(workspace_id=globex.id, name="GLOBEX_TOKEN", value=GLOBEX_VALUE)


def staff_client(django_user_model, workspace, role: str, username: str = "ada") -> Client:
    user = django_user_model.objects.create_user(username, password="pw", is_staff=True)
    Member.objects.create(workspace=workspace, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def acme_admin_client(django_user_model, workspace):
    """A staff user who is not a superuser: an admin of Acme, nothing in Globex."""
    return staff_client(django_user_model, workspace, Member.Role.ADMIN)


class Pages:
    """Every response a test got: no value and no ciphertext may be in any of them."""

    def __init__(self, client):
        self.client = client
        self.seen: list[str] = []

    def _keep(self, response):
        self.seen.append(response.content.decode(errors="replace") + response.get("Location", ""))
        return response

    def get(self, url, data=None):
        return self._keep(self.client.get(url, data))

    def post(self, url, data):
        return self._keep(self.client.post(url, data))

    def assert_never_shown(self, *values: str) -> None:
        for secret in Secret.objects.all():
            ciphertext = bytes(secret.ciphertext)
            values += (ciphertext.hex(), base64.b64encode(ciphertext).decode(), repr(ciphertext)[2:40])
        for page in self.seen:
            for value in values:
                assert value not in page


def stored_value(secret_id: int) -> str:
    secret = Secret.objects.get(id=secret_id)
    for value in (VALUE, NEW_VALUE, GLOBEX_VALUE):
        assert value.encode() not in bytes(secret.ciphertext)
    return _plain(secret)


def test_a_superuser_adds_replaces_and_deletes_at_both_places(admin_client, admin_user, vault, workspace, agent):
    pages = Pages(admin_client)
    form = pages.get(ADD).content.decode()
    assert 'type="password"' in form and 'autocomplete="off"' in form and "ciphertext" not in form

    response = pages.post(ADD, {"workspace": workspace.id, "agent": "", "name": "GITHUB_TOKEN", "value": VALUE})
    assert response.status_code == 302, response.content.decode()
    response = pages.post(
        ADD, {"workspace": workspace.id, "agent": agent.id, "name": "GITHUB_TOKEN", "value": VALUE, "as_file": "on"}
    )
    assert response.status_code == 302, response.content.decode()
    at_workspace = Secret.objects.get(workspace=workspace, agent=None, name="GITHUB_TOKEN")
    at_agent = Secret.objects.get(workspace=workspace, agent=agent, name="GITHUB_TOKEN")
    assert (at_workspace.scope, at_agent.scope, at_agent.as_file) == ("workspace", "agent", True)
    assert stored_value(at_workspace.id) == VALUE and stored_value(at_agent.id) == VALUE
    assert at_workspace.set_by is None  # the superuser is no member of Acme

    listing = pages.get(LIST).content.decode()
    assert "GITHUB_TOKEN" in listing and "agent builder" in listing and "workspace" in listing
    change_page = pages.get(change_url(at_agent)).content.decode()
    assert at_agent.key_id in change_page  # which key, shown read-only; never the key itself
    assert 'name="value"' in change_page and 'name="name"' not in change_page

    response = pages.post(change_url(at_agent), {"value": NEW_VALUE, "as_file": "on"})
    assert response.status_code == 302, response.content.decode()
    assert stored_value(at_agent.id) == NEW_VALUE and stored_value(at_workspace.id) == VALUE
    pages.get(response["Location"])

    # An empty value keeps the current one; as_file alone changes.
    response = pages.post(change_url(at_workspace), {"value": "", "as_file": "on"})
    assert response.status_code == 302
    assert stored_value(at_workspace.id) == VALUE and Secret.objects.get(id=at_workspace.id).as_file

    response = pages.post(delete_url(at_agent), {"post": "yes"})
    assert response.status_code == 302
    assert list(Secret.objects.values_list("id", flat=True)) == [at_workspace.id]
    pages.assert_never_shown(VALUE, NEW_VALUE)
    assert not LogEntry.objects.filter(change_message__contains=VALUE).exists()


def test_bulk_delete(admin_client, vault, workspace, agent):
    first = secret_put(workspace_id=workspace.id, name="A", value=VALUE)
    second = secret_put(workspace_id=workspace.id, agent_id=agent.id, name="B", value=VALUE)
    kept = secret_put(workspace_id=workspace.id, name="C", value=VALUE)
    response = admin_client.post(
        LIST, {"action": "delete_selected", "_selected_action": [first.id, second.id], "post": "yes"}
    )
    assert response.status_code == 302
    assert list(Secret.objects.values_list("id", flat=True)) == [kept.id]


def test_the_value_is_never_rendered_back_after_an_error(admin_client, vault, workspace):
    pages = Pages(admin_client)
    response = pages.post(ADD, {"workspace": workspace.id, "name": "1BAD NAME", "value": VALUE})
    assert response.status_code == 200
    assert "environment variable name" in response.content.decode()
    pages.assert_never_shown(VALUE)
    assert not Secret.objects.exists()


def test_an_oversized_value_is_refused_and_nothing_stored(admin_client, vault, workspace):
    huge = "x" * (MAX_VALUE_BYTES + 1)
    response = admin_client.post(ADD, {"workspace": workspace.id, "name": "BIG", "value": huge})
    assert response.status_code == 200
    page = response.content.decode()
    assert "larger than 64 KiB" in page and huge not in page
    assert not Secret.objects.exists()
    exactly = "y" * MAX_VALUE_BYTES
    assert admin_client.post(ADD, {"workspace": workspace.id, "name": "BIG", "value": exactly}).status_code == 302
    assert stored_value(Secret.objects.get(name="BIG").id) == exactly


def test_a_name_already_set_at_that_place_is_refused_on_add(admin_client, vault, workspace, agent):
    secret_put(workspace_id=workspace.id, name="TOKEN", value=VALUE)
    response = admin_client.post(ADD, {"workspace": workspace.id, "name": "TOKEN", "value": NEW_VALUE})
    assert response.status_code == 200
    assert "TOKEN is already set for the workspace: replace its value instead" in response.content.decode()
    assert stored_value(Secret.objects.get(name="TOKEN").id) == VALUE
    # The same name at an agent's place is another secret.
    response = admin_client.post(ADD, {"workspace": workspace.id, "agent": agent.id, "name": "TOKEN", "value": VALUE})
    assert response.status_code == 302


def test_an_agent_of_another_workspace_is_refused(admin_client, vault, workspace, globex_agent):
    response = admin_client.post(
        ADD, {"workspace": workspace.id, "agent": globex_agent.id, "name": "TOKEN", "value": VALUE}
    )
    assert response.status_code == 200
    assert "not one of this workspace&#x27;s agents" in response.content.decode()
    assert not Secret.objects.exists()


def test_without_a_vault_key_the_form_says_so(admin_client, settings, workspace):
    settings.SP_STORE_KEY = []
    response = admin_client.post(ADD, {"workspace": workspace.id, "name": "TOKEN", "value": VALUE})
    assert response.status_code == 200
    page = response.content.decode()
    assert "no vault key (SP_STORE_KEY)" in page and VALUE not in page
    assert not Secret.objects.exists()
    settings.SP_STORE_KEY = ["not-a-key"]
    response = admin_client.post(ADD, {"workspace": workspace.id, "name": "TOKEN", "value": VALUE})
    assert response.status_code == 200 and "not a valid key" in response.content.decode()
    assert not Secret.objects.exists()


def test_a_sessions_own_secret_is_shown_not_changed(admin_client, vault, workspace):
    session = session_start(workspace=workspace, title="t")
    secret = secret_set(session=session, name="ASKED", value=VALUE)
    page = admin_client.get(change_url(secret)).content.decode()
    assert "ASKED" in page and 'name="value"' not in page and VALUE not in page
    assert admin_client.post(change_url(secret), {"value": NEW_VALUE}).status_code == 403
    assert stored_value(secret.id) == VALUE
    assert "session " + str(session.id) in admin_client.get(LIST).content.decode()


def test_a_staff_admin_of_acme_manages_acme_only(acme_admin_client, vault, workspace, agent, globex, globex_agent):
    globex_secret = secret_put(workspace_id=globex.id, name="GLOBEX_TOKEN", value=GLOBEX_VALUE)
    pages = Pages(acme_admin_client)
    assert LIST in pages.get(reverse("admin:index")).content.decode()

    response = pages.post(ADD, {"workspace": workspace.id, "agent": agent.id, "name": "ACME_TOKEN", "value": VALUE})
    assert response.status_code == 302, response.content.decode()
    acme_secret = Secret.objects.get(name="ACME_TOKEN")
    assert acme_secret.set_by.user.username == "ada" and stored_value(acme_secret.id) == VALUE

    listing = pages.get(LIST).content.decode()
    assert "ACME_TOKEN" in listing and "GLOBEX_TOKEN" not in listing and "Globex" not in listing
    add_form = pages.get(ADD).content.decode()
    assert "Globex" not in add_form and "deployer" not in add_form

    # Globex's secret: not listed, not shown, not changed, not deleted, not bulk-deleted.
    assert pages.get(change_url(globex_secret)).status_code == 302  # "does not exist"
    assert pages.post(change_url(globex_secret), {"value": "stolen"}).status_code == 302
    assert pages.post(delete_url(globex_secret), {"post": "yes"}).status_code == 302
    pages.post(LIST, {"action": "delete_selected", "_selected_action": [globex_secret.id], "post": "yes"})
    assert stored_value(globex_secret.id) == GLOBEX_VALUE

    # Nor can Acme's admin add to Globex, or to a Globex agent.
    for data in (
        {"workspace": globex.id, "name": "PLANTED", "value": VALUE},
        {"workspace": workspace.id, "agent": globex_agent.id, "name": "PLANTED", "value": VALUE},
    ):
        response = pages.post(ADD, data)
        assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not Secret.objects.filter(name="PLANTED").exists()
    assert Secret.objects.count() == 2
    pages.assert_never_shown(VALUE, GLOBEX_VALUE)


def test_a_staff_user_who_is_a_plain_member_manages_nothing(django_user_model, vault, workspace, globex_secret):
    client = staff_client(django_user_model, workspace, Member.Role.MEMBER, username="mo")
    acme_secret = secret_put(workspace_id=workspace.id, name="ACME_TOKEN", value=VALUE)
    # A plain member administers no workspace: the admin sends them to its login page, for every page.
    for response in (
        client.get(LIST),
        client.post(ADD, {"workspace": workspace.id, "name": "PLANTED", "value": VALUE}),
        client.post(change_url(acme_secret), {"value": "stolen"}),
        client.post(delete_url(acme_secret), {"post": "yes"}),
        client.get(reverse("admin:index")),
    ):
        assert response.status_code == 302 and response.url.startswith(reverse("admin:login"))
    assert stored_value(acme_secret.id) == VALUE and Secret.objects.count() == 2


def test_the_admin_refuses_a_post_without_the_csrf_token(admin_user, vault, workspace):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.post(ADD, {"workspace": workspace.id, "name": "TOKEN", "value": VALUE})
    assert response.status_code == 403
    assert not Secret.objects.exists()


def test_secret_requests_are_listed_read_only_and_scoped(admin_client, acme_admin_client, workspace, globex):
    def request_in(ws, name):
        session = session_start(workspace=ws, title="t")
        call = ToolCall.objects.create(session=session, tool="request_secret")
        return SecretRequest.objects.create(session=session, tool_call=call, name=name, reason="to deploy")

    acme, globex_request = request_in(workspace, "ACME_ASKED"), request_in(globex, "GLOBEX_ASKED")
    url = reverse("admin:secrets_vault_secretrequest_changelist")
    everything = admin_client.get(url).content.decode()
    assert "ACME_ASKED" in everything and "GLOBEX_ASKED" in everything
    assert admin_client.get(reverse("admin:secrets_vault_secretrequest_add")).status_code == 403
    detail = admin_client.get(reverse("admin:secrets_vault_secretrequest_change", args=[acme.pk]))
    assert detail.status_code == 200 and "to deploy" in detail.content.decode()
    assert 'name="value"' not in detail.content.decode() and 'name="name"' not in detail.content.decode()

    acme_only = acme_admin_client.get(url).content.decode()
    assert "ACME_ASKED" in acme_only and "GLOBEX_ASKED" not in acme_only
    globex_detail = reverse("admin:secrets_vault_secretrequest_change", args=[globex_request.pk])
    assert acme_admin_client.get(globex_detail).status_code == 302
