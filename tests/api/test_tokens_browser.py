"""A person makes an API token on the dashboard, uses it, and revokes it, in Chromium; the
API's docs page renders from Calvin's own files."""

import httpx2
import pytest
from playwright.sync_api import expect

from calvin.api.models import ApiToken
from tests.dashboard.conftest import MEMBER_PASSWORD, OWNER_PASSWORD, browser_login

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_token_is_made_shown_once_used_and_revoked_from_the_dashboard(
    gateway,
    workspace,
    plain_member,
    page,
    tmp_path,
):
    browser_login(page, gateway, "owner", OWNER_PASSWORD)
    page.click("#tokens-link")
    expect(page.locator("#tokens")).to_contain_text("No tokens yet.")
    page.fill("#token-name", "laptop")
    page.select_option("#token-expires", "7")
    page.click("button:text-is('Make token')")
    token = page.locator("#token-value").inner_text()
    assert token.startswith("cpt_")
    expect(page.locator("#new-token")).to_contain_text("cannot show it again")
    page.screenshot(path=str(tmp_path / "tokens.png"), full_page=True)
    me = httpx2.get(f"{gateway}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["role"] == "owner", me.text

    page.goto(page.url)  # the page again: the token is not shown any more
    expect(page.locator("#tokens tr[data-token]")).to_have_count(1)
    assert token not in page.content()
    row = page.locator("#tokens tr[data-token]")
    expect(row.locator(".state")).to_have_text("live")
    expect(row).to_contain_text(token[:10])

    row.locator("button:text-is('Revoke')").click()
    expect(page.locator("body")).to_contain_text("Revoked: the token no longer works.")
    expect(page.locator("#tokens tr[data-token] .state")).to_have_text("revoked")
    refused = httpx2.get(f"{gateway}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401


def test_a_member_sees_and_revokes_only_their_own_tokens(gateway, workspace, plain_member, page):
    from calvin.api.tokens import api_token_create
    from calvin.workspaces.models import Member

    owner = Member.objects.get(workspace=workspace, user__username="owner")
    theirs, _ = api_token_create(member=owner, name="owner's CI")
    browser_login(page, gateway, "member", MEMBER_PASSWORD)
    page.goto(f"{gateway}/w/{workspace.slug}/tokens/")
    expect(page.locator("#tokens")).not_to_contain_text("owner's CI")
    # Forged: the owner's token's revoke URL, with this page's CSRF token.
    csrf = page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    answer = page.request.post(
        f"{gateway}/w/{workspace.slug}/tokens/{theirs.id}/revoke/",
        form={"csrfmiddlewaretoken": csrf},
        headers={"Referer": page.url},
    )
    assert answer.status == 404
    assert ApiToken.objects.get(id=theirs.id).revoked_at is None


def test_the_api_docs_page_renders_the_operations(gateway, page):
    page.goto(f"{gateway}/api/v1/docs")
    expect(page.locator(".swagger-ui")).to_contain_text("Calvin API", timeout=20_000)
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert any("/api/v1/sessions" in p for p in paths), paths
