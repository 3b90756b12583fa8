"""The audit log in real Chromium through uvicorn: a workspace owner (not staff) reads their
events, one event's before -> after table, and downloads the filtered list (streamed over ASGI)."""

import csv
import io
import os
from pathlib import Path

import pytest

from calvin.workspaces.models import Member
from tests.audit.conftest import event
from tests.dashboard.conftest import browser, page  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("CALVIN_VAR_DIR", "var")) / "screenshots"


def test_an_owner_reads_filters_and_exports_their_audit_log(gateway, tenants, page):  # noqa: F811
    acme, globex = tenants["acme"], tenants["globex"]
    ann = Member.objects.get(workspace=acme, user=tenants["ann"])
    role = event(workspace=acme, verb="member.role_change", actor=ann, changes={"role": ("member", "admin")})
    event(
        workspace=acme, verb="secret.set", actor=ann, changes={"name": (None, "=CMD()"), "scope": (None, "workspace")}
    )
    event(workspace=acme, verb="session.stop", via="slack", changes={"status": ("running", "stopping")})
    event(workspace=globex, verb="host.create", changes={"name": (None, "globex-secret-box")})
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{gateway}/admin/login/")
    page.fill("#id_username", "ann")
    page.fill("#id_password", "pw-ann-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway}/admin/")

    page.goto(f"{gateway}/admin/audit/auditevent/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 3
    assert "globex-secret-box" not in page.content() and "Globex" not in page.inner_text("#changelist-filter")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "audit-list.png"), full_page=True)

    page.goto(f"{gateway}/admin/audit/auditevent/{role.id}/change/")
    table = page.locator("table.audit-changes")
    assert table.locator("tr").nth(1).inner_text().split() == ["role", "member", "→", "admin"]
    assert page.locator("input[type=submit]").count() == 0  # read-only: nothing to save or delete
    page.screenshot(path=str(SHOTS / "audit-event.png"), full_page=True)

    page.goto(f"{gateway}/admin/audit/auditevent/?verb=secret.set")
    with page.expect_download() as download:
        page.click("a.audit-export:text-is('Export CSV')")
    body = Path(download.value.path()).read_text(encoding="utf-8")
    (row,) = list(csv.DictReader(io.StringIO(body)))
    assert (row["verb"], row["workspace"], row["actor_label"]) == ("secret.set", "acme", "ann")
    assert download.value.suggested_filename.startswith("audit-") and download.value.suggested_filename.endswith(".csv")
