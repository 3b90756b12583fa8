"""The audit log in real Chromium through uvicorn: a workspace owner (not staff) reads their
events, one event's before -> after table, and downloads the filtered list (streamed over ASGI)."""

import csv
import io
import os
from datetime import timedelta
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


def test_a_large_export_streams_over_uvicorn_in_chunks(gateway, tenants):
    """More rows than one database chunk, through the real ASGI server: every row, in order, once."""
    import httpx2
    from django.utils import timezone

    from calvin.audit.models import AuditEvent
    from tests.dashboard.conftest import post_login_form

    now = timezone.now()
    count = 4500  # > 2 chunks of CHUNK_ROWS
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(workspace=tenants["acme"], verb="session.stop", at=now - timedelta(seconds=i))
            for i in range(count)
        ]
        + [AuditEvent(workspace=tenants["globex"], verb="session.stop", at=now)]
    )
    with httpx2.Client(base_url=gateway, timeout=30) as http:
        assert post_login_form(http, "ann", "pw-ann-123", path="/admin/login/").status_code == 302
        with http.stream("GET", "/admin/audit/auditevent/export/", params={"format": "jsonl"}) as response:
            assert response.status_code == 200 and "content-length" not in response.headers
            lines = [line for line in response.iter_lines() if line]
    assert len(lines) == count
    assert all('"workspace": "acme"' in line for line in lines)
