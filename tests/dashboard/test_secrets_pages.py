"""The dashboard's secrets page: a workspace's owners and admins set, replace and delete its
workspace-level and agent-level secrets through a write-only value; nobody else sees the page."""

import base64

import pytest
from django.test import Client
from playwright.sync_api import expect

from calvin.workspaces.models import Member
from calvin.workspaces.services import agent_create
from secrets_vault.models import MAX_VALUE_BYTES, Secret
from secrets_vault.services import _plain, secret_put, secret_set
from sessions.services import session_start
from tests.dashboard.conftest import OWNER_PASSWORD, browser_login, csrf_token_in, logged_in

VALUE = "sk-live-typed-into-the-dashboard-0042"
NEW_VALUE = "sk-live-replaced-0043"
GLOBEX_VALUE = "globex-value-0044"


def secrets_url(workspace_id: int, tail: str = "") -> str:
    return f"/workspaces/{workspace_id}/secrets/{tail}"


@pytest.fixture
def agent(workspace):
    return agent_create(workspace=workspace, name="builder")


@pytest.fixture
def owner_client(client, owner_member):
    client.force_login(owner_member.user)
    return client


class Pages:
    """A test client keeping every response: no value and no ciphertext may be in any of them."""

    def __init__(self, client):
        self.client = client
        self.seen: list[str] = []

    def _keep(self, response):
        self.seen.append(response.content.decode(errors="replace") + response.get("Location", ""))
        return response

    def get(self, url):
        return self._keep(self.client.get(url))

    def post(self, url, data=None, follow=False):
        response = self._keep(self.client.post(url, data or {}, follow=follow))
        for hop, _ in getattr(response, "redirect_chain", []):
            self.seen.append(hop)
        return response

    def assert_never_shown(self, *values: str) -> None:
        for secret in Secret.objects.all():
            ciphertext = bytes(secret.ciphertext)
            values += (ciphertext.hex(), base64.b64encode(ciphertext).decode())
        for page in self.seen:
            for value in values:
                assert value not in page


def stored_value(secret: Secret) -> str:
    row = Secret.objects.get(id=secret.id)
    for value in (VALUE, NEW_VALUE, GLOBEX_VALUE):
        assert value.encode() not in bytes(row.ciphertext)
    return _plain(row)


def snapshot() -> list[tuple]:
    return list(Secret.objects.order_by("id").values_list("id", "name", "agent_id", "key_id", "ciphertext", "as_file"))


@pytest.mark.django_db
def test_an_owner_sets_replaces_and_deletes_at_both_places(owner_client, owner_member, vault, workspace, agent):
    pages = Pages(owner_client)
    page = pages.get(secrets_url(workspace.id)).content.decode()
    assert "Secrets of Acme" in page and "agent builder" in page and 'type="password"' in page

    response = pages.post(secrets_url(workspace.id, "new/"), {"name": "GITHUB_TOKEN", "agent": "", "value": VALUE})
    assert response.status_code == 302 and response["Location"] == secrets_url(workspace.id)
    response = pages.post(
        secrets_url(workspace.id, "new/"), {"name": "GITHUB_TOKEN", "agent": agent.id, "value": VALUE, "as_file": "on"}
    )
    assert response.status_code == 302
    at_workspace = Secret.objects.get(workspace=workspace, agent=None, name="GITHUB_TOKEN")
    at_agent = Secret.objects.get(workspace=workspace, agent=agent, name="GITHUB_TOKEN")
    assert stored_value(at_workspace) == VALUE and stored_value(at_agent) == VALUE
    assert at_agent.as_file and at_workspace.set_by == owner_member

    listing = pages.get(secrets_url(workspace.id)).content.decode()
    assert "GITHUB_TOKEN is set for agent builder." in listing  # the message after the redirect
    assert listing.count("<td>GITHUB_TOKEN</td>") == 2 and "owner" in listing

    response = pages.post(secrets_url(workspace.id, f"{at_agent.id}/replace/"), {"value": NEW_VALUE}, follow=True)
    assert "GITHUB_TOKEN (agent builder) has a new value." in response.content.decode()
    assert stored_value(at_agent) == NEW_VALUE and stored_value(at_workspace) == VALUE
    assert not Secret.objects.get(id=at_agent.id).as_file  # the box was left unticked

    response = pages.post(secrets_url(workspace.id, f"{at_workspace.id}/replace/"), {"value": NEW_VALUE})
    assert response.status_code == 302 and stored_value(at_workspace) == NEW_VALUE

    response = pages.post(secrets_url(workspace.id, f"{at_agent.id}/delete/"), follow=True)
    assert "GITHUB_TOKEN (agent builder) is deleted." in response.content.decode()
    response = pages.post(secrets_url(workspace.id, f"{at_workspace.id}/delete/"))
    assert response.status_code == 302 and not Secret.objects.exists()
    pages.assert_never_shown(VALUE, NEW_VALUE)


@pytest.mark.django_db
def test_a_workspace_admin_manages_it_too(client, django_user_model, vault, workspace):
    user = django_user_model.objects.create_user("ada")
    Member.objects.create(workspace=workspace, user=user, role=Member.Role.ADMIN)
    client.force_login(user)
    assert client.post(secrets_url(workspace.id, "new/"), {"name": "TOKEN", "value": VALUE}).status_code == 302
    assert Secret.objects.get(name="TOKEN").set_by.user == user


@pytest.mark.django_db
def test_nobody_else_sees_or_changes_anything(
    client, plain_member, stranger_member, other_workspace, vault, workspace, agent
):
    acme_secret = secret_put(workspace_id=workspace.id, agent_id=agent.id, name="ACME_TOKEN", value=VALUE)
    globex_secret = secret_put(workspace_id=other_workspace.id, name="GLOBEX_TOKEN", value=GLOBEX_VALUE)
    before = snapshot()

    def every_request(workspace_id: int, secret_id: int):
        yield "get", secrets_url(workspace_id), None
        yield "post", secrets_url(workspace_id, "new/"), {"name": "PLANTED", "value": "x"}
        yield "post", secrets_url(workspace_id, f"{secret_id}/replace/"), {"value": "stolen"}
        yield "post", secrets_url(workspace_id, f"{secret_id}/delete/"), {}

    # Acme's plain member and Globex's owner: Acme's pages do not exist for them.
    for member in (plain_member, stranger_member):
        client.force_login(member.user)
        for method, url, data in every_request(workspace.id, acme_secret.id):
            response = getattr(client, method)(url, data)
            assert response.status_code == 404, (member, url)
            assert "ACME_TOKEN" not in response.content.decode()
    # Globex's owner on their own workspace's pages, with Acme's secret id.
    for method, url, data in list(every_request(other_workspace.id, acme_secret.id))[2:]:
        assert getattr(client, method)(url, data).status_code == 404, url
    assert "ACME_TOKEN" not in client.get(secrets_url(other_workspace.id)).content.decode()
    # Not logged in: the login page.
    client.logout()
    for method, url, data in every_request(workspace.id, acme_secret.id):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    assert snapshot() == before
    assert stored_value(globex_secret) == GLOBEX_VALUE


@pytest.mark.django_db
def test_the_home_page_links_to_the_secrets_of_workspaces_one_manages(
    client, owner_member, plain_member, stranger_member, workspace, other_workspace
):
    client.force_login(owner_member.user)
    assert f'href="{secrets_url(workspace.id)}"' in client.get("/w/acme/").content.decode()
    client.force_login(plain_member.user)
    assert "/secrets/" not in client.get("/w/acme/").content.decode()


@pytest.mark.django_db
def test_a_post_without_the_csrf_token_is_refused(owner_member, vault, workspace):
    secret = secret_put(workspace_id=workspace.id, name="TOKEN", value=VALUE)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner_member.user)
    before = snapshot()
    for url, data in (
        (secrets_url(workspace.id, "new/"), {"name": "PLANTED", "value": NEW_VALUE}),
        (secrets_url(workspace.id, f"{secret.id}/replace/"), {"value": NEW_VALUE}),
        (secrets_url(workspace.id, f"{secret.id}/delete/"), {}),
    ):
        assert client.post(url, data).status_code == 403, url
    assert snapshot() == before


@pytest.mark.django_db
def test_an_oversized_value_is_refused_with_a_message(owner_client, vault, workspace):
    existing = secret_put(workspace_id=workspace.id, name="KEPT", value=VALUE)
    huge = "v" * (MAX_VALUE_BYTES + 1)
    response = owner_client.post(secrets_url(workspace.id, "new/"), {"name": "BIG", "value": huge})
    assert response.status_code == 400
    page = response.content.decode()
    assert "the value is larger than 64 KiB" in page and huge not in page and 'value="BIG"' in page
    response = owner_client.post(secrets_url(workspace.id, f"{existing.id}/replace/"), {"value": huge}, follow=True)
    assert "KEPT (the workspace) was not replaced: the value is larger than 64 KiB" in response.content.decode()
    assert huge not in response.content.decode()
    assert list(Secret.objects.values_list("name", flat=True)) == ["KEPT"] and stored_value(existing) == VALUE
    # Multi-byte characters count as their bytes.
    response = owner_client.post(secrets_url(workspace.id, "new/"), {"name": "BIG", "value": "é" * (32 * 1024 + 1)})
    assert response.status_code == 400 and not Secret.objects.filter(name="BIG").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["1TOKEN", "MY-TOKEN", "WITH SPACE", "", "A" * 129, "TOKEN$"])
def test_a_bad_name_is_refused(owner_client, vault, workspace, name):
    pages = Pages(owner_client)
    response = pages.post(secrets_url(workspace.id, "new/"), {"name": name, "value": VALUE})
    assert response.status_code == 400
    page = response.content.decode()
    assert "environment variable name" in page or "This field is required" in page or "at most 128" in page
    assert not Secret.objects.exists()
    pages.assert_never_shown(VALUE)


@pytest.mark.django_db
def test_an_empty_value_or_a_name_already_set_is_refused(owner_client, vault, workspace, agent):
    response = owner_client.post(secrets_url(workspace.id, "new/"), {"name": "TOKEN", "value": ""})
    assert response.status_code == 400 and "type the value" in response.content.decode()
    secret_put(workspace_id=workspace.id, agent_id=agent.id, name="TOKEN", value=VALUE)
    response = owner_client.post(secrets_url(workspace.id, "new/"), {"name": "TOKEN", "agent": agent.id, "value": "v"})
    assert response.status_code == 400
    assert "TOKEN is already set for agent builder: replace its value instead" in response.content.decode()
    assert Secret.objects.count() == 1 and stored_value(Secret.objects.get()) == VALUE


@pytest.mark.django_db
def test_an_agent_of_another_workspace_is_refused(owner_client, vault, workspace, other_workspace):
    theirs = agent_create(workspace=other_workspace, name="deployer")
    page = owner_client.get(secrets_url(workspace.id)).content.decode()
    assert "deployer" not in page
    response = owner_client.post(
        secrets_url(workspace.id, "new/"), {"name": "TOKEN", "agent": theirs.id, "value": VALUE}
    )
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert not Secret.objects.exists()


@pytest.mark.django_db
def test_without_a_vault_key_the_page_says_so(owner_client, settings, workspace):
    settings.SP_STORE_KEY = []
    page = owner_client.get(secrets_url(workspace.id)).content.decode()
    assert "no vault key (SP_STORE_KEY)" in page
    response = owner_client.post(secrets_url(workspace.id, "new/"), {"name": "TOKEN", "value": VALUE})
    assert response.status_code == 400
    page = response.content.decode()
    assert page.count("no vault key (SP_STORE_KEY)") == 2 and VALUE not in page  # the banner and the form
    assert not Secret.objects.exists()


@pytest.mark.django_db
def test_a_sessions_own_secret_is_listed_read_only(owner_client, owner_member, vault, workspace):
    session = session_start(workspace=workspace, owner=owner_member, title="t")
    secret = secret_set(session=session, name="ASKED", value=VALUE)
    page = owner_client.get(secrets_url(workspace.id)).content.decode()
    assert "ASKED" in page and f"session {session.id}" in page and f"/threads/{session.thread_id}/" in page
    assert f"{secret.id}/replace/" not in page and f"{secret.id}/delete/" not in page
    before = snapshot()
    assert owner_client.post(secrets_url(workspace.id, f"{secret.id}/replace/"), {"value": "x"}).status_code == 404
    assert owner_client.post(secrets_url(workspace.id, f"{secret.id}/delete/")).status_code == 404
    assert snapshot() == before and stored_value(secret) == VALUE


@pytest.mark.django_db(transaction=True)
def test_over_real_http_the_value_goes_in_and_never_comes_out(gateway, vault, workspace, agent):
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        seen = []

        def keep(response):
            seen.append(response.text + response.headers.get("location", ""))
            return response

        page = keep(http.get(secrets_url(workspace.id))).text
        response = keep(
            http.post(
                secrets_url(workspace.id, "new/"),
                data={
                    "name": "DEPLOY_KEY",
                    "agent": agent.id,
                    "value": VALUE,
                    "csrfmiddlewaretoken": csrf_token_in(page),
                },
            )
        )
        assert response.status_code == 302, response.text
        secret = Secret.objects.get(name="DEPLOY_KEY", agent=agent)
        page = keep(http.get(secrets_url(workspace.id))).text
        assert "DEPLOY_KEY is set for agent builder." in page
        response = keep(
            http.post(
                secrets_url(workspace.id, f"{secret.id}/replace/"),
                data={"value": NEW_VALUE, "csrfmiddlewaretoken": csrf_token_in(page)},
            )
        )
        assert response.status_code == 302 and stored_value(secret) == NEW_VALUE
        keep(http.get(secrets_url(workspace.id)))
        ciphertext = bytes(Secret.objects.get(id=secret.id).ciphertext)
        for text in seen:
            assert VALUE not in text and NEW_VALUE not in text and ciphertext.hex() not in text


@pytest.mark.django_db(transaction=True)
def test_the_page_works_in_chromium_under_the_policy(gateway, vault, workspace, agent, page):
    violations = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security" in message.text else None)
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.click("#secrets-link")  # on the workspace home
    page.fill("#id_name", "NPM_TOKEN")
    page.select_option("#id_agent", label="agent builder")
    page.fill("#id_value", VALUE)
    page.click("#secret-new button[type=submit]")
    expect(page.locator("#messages-sent")).to_contain_text("NPM_TOKEN is set for agent builder.")
    expect(page.get_by_text("NPM_TOKEN is set for agent builder.")).to_have_count(1)  # in its panel only
    assert VALUE not in page.content() and page.url == gateway + secrets_url(workspace.id)
    secret = Secret.objects.get(name="NPM_TOKEN")
    assert stored_value(secret) == VALUE

    row = page.locator(f"tr[data-secret='{secret.id}']")
    row.locator("summary").click()
    row.locator("button.danger").click()
    expect(page.locator("#messages-sent")).to_contain_text("NPM_TOKEN (agent builder) is deleted.")
    assert not Secret.objects.exists()
    assert page.locator("script:not([src])").count() == 0 and page.locator("style").count() == 0
    assert violations == []


KEY_FILE = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\nAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----\n"
)


@pytest.mark.django_db
def test_a_key_file_with_line_breaks_is_uploaded_and_replaced(owner_client, vault, workspace, agent):
    from django.core.files.uploadedfile import SimpleUploadedFile

    pages = Pages(owner_client)
    upload = SimpleUploadedFile("id_deploy", KEY_FILE.encode())
    data = {"name": "DEPLOY_KEY", "agent": agent.id, "value": "", "as_file": "on", "file": upload}
    response = pages.post(secrets_url(workspace.id, "new/"), data)
    assert response.status_code == 302, response.content.decode()[:500]
    secret = Secret.objects.get(workspace=workspace, agent=agent, name="DEPLOY_KEY")
    assert _plain(secret) == KEY_FILE and secret.as_file
    replaced = KEY_FILE.replace("AAAA", "BBBB")
    upload = SimpleUploadedFile("id_deploy", replaced.encode())
    pages.post(secrets_url(workspace.id, f"{secret.id}/replace/"), {"value": "", "as_file": "on", "file": upload})
    assert _plain(Secret.objects.get(id=secret.id)) == replaced
    pages.assert_never_shown(KEY_FILE, replaced, "b3BlbnNzaC1rZXktdjEA")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "value", "expected"),
    [
        (b"\xff\xfe\x00binary", "", "the file is not text (UTF-8)"),
        (KEY_FILE.encode(), "typed-as-well-1", "type the value or upload a file, not both"),
        (b"x" * (64 * 1024 + 1), "", "the file is larger than 64 KiB"),
    ],
)
def test_an_upload_that_cannot_be_a_value_is_refused(owner_client, vault, workspace, content, value, expected):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = {"name": "DEPLOY_KEY", "agent": "", "value": value, "file": SimpleUploadedFile("f", content)}
    response = owner_client.post(secrets_url(workspace.id, "new/"), data)
    assert response.status_code == 400 and expected in response.content.decode()
    assert not Secret.objects.exists()
