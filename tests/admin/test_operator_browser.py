"""In real Chromium through uvicorn: a workspace admin (neither staff nor a superuser) logs into
/admin/, approves a pending approval through its confirmation page, stops a running session
the same way, and opens an agent's form with its real widgets. Screenshots of each page go to
var/<test name>/screenshots/h5-*.png."""

import os
from pathlib import Path

import pytest

from approvals.models import PendingApproval
from calvin.workspaces.models import Member
from calvin.workspaces.services import agent_create
from sessions.models import Turn
from sessions.scheduling import turns_claim
from tests.admin.conftest import approval_in, live_host, session_in
from tests.dashboard.conftest import browser, page  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("CALVIN_VAR_DIR", "var")) / "screenshots"
ADA_PASSWORD = "pw-ada-12345"


@pytest.fixture
def ada(workspace, django_user_model):
    user = django_user_model.objects.create_user("ada", "ada@example.com", ADA_PASSWORD)
    assert not user.is_staff and not user.is_superuser
    return Member.objects.create(workspace=workspace, user=user, role=Member.Role.ADMIN)


def run_action(tab, base: str, changelist: str, row_id: int, action: str) -> None:
    tab.goto(f"{base}{changelist}")
    tab.check(f"input.action-select[value='{row_id}']")
    tab.select_option("select[name=action]", action)
    tab.click("button[name=index]")
    tab.wait_for_selector("#operator-plan")


def shot(tab, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"h5-{name}.png"), full_page=True)


def test_a_workspace_admin_approves_and_stops_from_the_admin(gateway, ada, workspace, other_workspace, page):  # noqa: F811
    approval = approval_in(session_in(workspace, title="Release"))
    approval_in(session_in(other_workspace, title="Globex"), summary="Globex plan")
    running = session_in(workspace, prompt="build it", title="Build")
    assert [t["session"] for t in turns_claim(host_id=live_host("box", workspace).id)] == [running.id]

    page.goto(f"{gateway}/admin/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", ADA_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway}/admin/")

    run_action(page, gateway, "/admin/approvals/pendingapproval/", approval.id, "approve_selected")
    plan = page.inner_text("#operator-plan")
    assert "approve install_packages: install apt: jq" in plan and "Globex" not in page.content()
    assert PendingApproval.objects.get(id=approval.id).status == "pending"
    shot(page, "confirm-approve")
    page.click("input[type=submit][value^='Yes, approve 1 row']")
    page.wait_for_selector("ul.messagelist")
    assert f"Approval {approval.id}: Approved: install apt: jq. Applying it now." in page.inner_text("ul.messagelist")
    approval.refresh_from_db()
    # The worker may have applied it already: "approved" then "applied".
    assert approval.status in ("approved", "applied"), approval.status
    assert approval.decided_by_id == ada.id and approval.decided_via == "admin"

    run_action(page, gateway, "/admin/agent_sessions/session/", running.id, "stop")
    assert "end its running agent's processes" in page.inner_text("#operator-plan")
    shot(page, "confirm-stop")
    page.click("input[type=submit][value^='Yes, stop 1 row']")
    page.wait_for_selector("ul.messagelist")
    assert f"Session {running.id}: stopping" in page.inner_text("ul.messagelist")
    assert Turn.objects.get(session=running).error == "stopped by ada"


def test_the_agent_form_in_chromium(gateway, ada, workspace, page):  # noqa: F811
    agent = agent_create(
        workspace=workspace,
        name="builder",
        apt_packages=["jq", "ripgrep"],
        npm_packages=["typescript"],
        mcp_servers={"search": {"command": "npx", "args": ["-y", "search-mcp"], "env": {"KEY": "vault:search_key"}}},
    )
    session_in(workspace, title="Release planning")
    page.goto(f"{gateway}/admin/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", ADA_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway}/admin/")
    page.goto(f"{gateway}/admin/workspaces/agent/{agent.id}/change/")
    assert page.is_checked("input[name=tool_sets][value=calvin]")
    assert page.input_value("textarea[name=apt_packages]") == "jq\nripgrep"
    assert page.input_value("input[name='mcp_servers-0-name']") == "search"
    shot(page, "agent-form")
    page.fill("textarea[name=apt_packages]", "jq\nripgrep\nfd-find")
    page.uncheck("input[name=tool_sets][value=nanoclaw]")
    page.click("input[name=_continue]")
    page.wait_for_selector("ul.messagelist")
    agent.refresh_from_db()
    assert agent.apt_packages == ["jq", "ripgrep", "fd-find"] and agent.tool_sets == ["calvin"]
    assert agent.environment_version == 2
    page.fill("input[name='mcp_servers-1-name']", "calvin")
    page.fill("input[name='mcp_servers-1-command']", "evil")
    page.click("input[name=_continue]")
    page.wait_for_selector(".errornote")
    assert "reserved for Calvin" in page.inner_text(".field-mcp_servers")
    shot(page, "agent-form-refused")


def test_a_new_host_token_page_and_the_vault_rotation_in_chromium(
    gateway,
    ada,
    workspace,
    settings,
    django_user_model,
    page,  # noqa: F811
):
    from secrets_vault.crypto import new_key, vault_keys
    from secrets_vault.models import Secret
    from secrets_vault.services import secret_set_for_workspace

    host = live_host("box", workspace)
    page.goto(f"{gateway}/admin/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", ADA_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway}/admin/")
    run_action(page, gateway, "/admin/agent_sessions/host/", host.id, "reset_token")
    page.click("input[type=submit][value^='Yes, replace the token of 1 row']")
    page.wait_for_selector("#operator-outcomes")
    host.refresh_from_db()
    assert f"shown this once: {host.token_hint}" in page.inner_text("#operator-outcomes")
    shot(page, "host-token-shown-once")
    page.goto(f"{gateway}/admin/agent_sessions/host/")
    assert host.token_hint not in page.content()

    # The vault key: a superuser's page (the live server reads the same settings object).
    old = settings.SP_STORE_KEY[0]
    secret_set_for_workspace(workspace_id=workspace.id, name="API_TOKEN", value="s3cr3t-value-123")
    settings.SP_STORE_KEY = [new_key(), old]
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-12345")
    page.context.clear_cookies()  # log out: a new person in the same browser
    page.goto(f"{gateway}/admin/login/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw-root-12345")
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway}/admin/")
    page.goto(f"{gateway}/admin/secrets_vault/secret/")
    page.click("text=Rotate the vault key")
    page.wait_for_selector("#vault-counts")
    shot(page, "vault-rotate")
    page.click("input[type=submit][value^='Yes, re-encrypt']")
    page.wait_for_selector("ul.messagelist")
    assert "Vault key rotated: 1 secret(s)" in page.inner_text("ul.messagelist")
    assert set(Secret.objects.values_list("key_id", flat=True)) == {vault_keys()[0].key_id}
