"""manage.py audit_export: one workspace, a day range, JSON lines or CSV, formula-safe cells."""

import csv
import io
import json
from datetime import datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from calvin.audit.export import COLUMNS, audit_export_lines
from calvin.audit.models import AuditEvent
from tests.audit.conftest import event

pytestmark = pytest.mark.django_db(transaction=True)


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.get_current_timezone())


def export(*args) -> str:
    out = io.StringIO()
    call_command("audit_export", *args, stdout=out)
    return out.getvalue()


def test_jsonl_is_one_workspace_in_the_range_oldest_first(tenants):
    acme, globex = tenants["acme"], tenants["globex"]
    before = event(workspace=acme, verb="secret.set", at=day("2026-03-31T23:59:59"))
    first = event(workspace=acme, verb="session.stop", at=day("2026-04-01T00:00:00"))
    last = event(workspace=acme, verb="approval.approve", at=day("2026-04-30T23:59:59"), changes={"status": ("p", "a")})
    after = event(workspace=acme, verb="host.create", at=day("2026-05-01T00:00:00"))
    event(workspace=globex, verb="session.stop", at=day("2026-04-10T12:00:00"))
    text = export("--workspace", "acme", "--since", "2026-04-01", "--until", "2026-04-30")
    rows = [json.loads(line) for line in text.splitlines()]
    assert [r["id"] for r in rows] == [first.id, last.id]
    assert list(rows[0]) == list(COLUMNS)
    assert rows[1]["workspace"] == "acme" and rows[1]["changes"] == {"status": ["p", "a"]}
    assert rows[1]["ip"] == "203.0.113.5" and rows[1]["via"] == "web"
    all_acme = [json.loads(line)["id"] for line in export("--workspace", "acme").splitlines()]
    assert all_acme == [before.id, first.id, last.id, after.id]


def test_csv_has_a_stable_header_and_defuses_formulas(tenants, tmp_path):
    acme = tenants["acme"]
    event(workspace=acme, verb="secret.set", changes={"name": ("", "=HYPERLINK(1)")})
    AuditEvent.objects.filter(workspace=acme).update(target_label="@SUM(A1)", actor_label="-2+3", target_type="+x")
    target = tmp_path / "acme.csv"
    export("--workspace", "acme", "--format", "csv", "--output", str(target))
    header, row = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert header == list(COLUMNS)
    cells = dict(zip(header, row, strict=True))
    assert (cells["target_label"], cells["actor_label"], cells["target_type"]) == ("'@SUM(A1)", "'-2+3", "'+x")
    assert json.loads(cells["changes"]) == {"name": ["", "=HYPERLINK(1)"]}  # a JSON cell starts with {
    assert cells["workspace"] == "acme" and cells["verb"] == "secret.set"


def test_an_empty_csv_still_has_its_header(tenants):
    assert export("--workspace", "globex", "--format", "csv").splitlines() == [",".join(COLUMNS)]


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--workspace", "nope"], "no workspace"),
        (["--workspace", "acme\x00"], "no workspace"),
        (["--workspace", "аcme"], "no workspace"),  # a Cyrillic а
        (["--workspace", "acme", "--since", "2026-4-1"], "YYYY-MM-DD"),
        (["--workspace", "acme", "--since", "20260401"], "YYYY-MM-DD"),
        (["--workspace", "acme", "--until", "2026-02-30"], "YYYY-MM-DD"),
        (["--workspace", "acme", "--since", "2026-05-01", "--until", "2026-04-01"], "before --since"),
        (["--workspace", "acme", "--output", "/nonexistent-dir/acme.csv"], "cannot write"),
        (["--workspace", "a" * 5000], "no workspace"),
    ],
)
def test_bad_arguments_are_refused_clearly(tenants, args, problem):
    with pytest.raises(CommandError, match=problem):
        export(*args)


def test_rows_are_streamed_in_chunks_not_loaded(tenants, monkeypatch):
    """The rows come from a server-side cursor, CHUNK_ROWS at a time, as they are written."""
    from django.db.models.query import QuerySet

    acme = tenants["acme"]
    now = timezone.now()
    AuditEvent.objects.bulk_create(
        [AuditEvent(workspace=acme, verb="session.stop", at=now - timedelta(seconds=i)) for i in range(5000)]
    )
    sizes = []
    iterator = QuerySet.iterator

    def spied(self, chunk_size=None):
        sizes.append(chunk_size)
        return iterator(self, chunk_size=chunk_size)

    monkeypatch.setattr(QuerySet, "iterator", spied)
    lines = audit_export_lines(AuditEvent.objects.filter(workspace=acme), format="jsonl")
    assert sizes == []  # nothing runs until the first row is asked for
    assert next(lines).startswith("{") and sizes == [2000]
    assert sum(1 for _ in lines) == 4999
