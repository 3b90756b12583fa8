"""The audit log as JSON lines or CSV: one row per event, the columns always in this order.

Both are written row by row from a database iterator, so a million events never sit in
memory; `manage.py audit_export` and the admin's Export button share this."""

import csv
import io
import json
from collections.abc import Iterator

from django.core.serializers.json import DjangoJSONEncoder

COLUMNS = (
    "id",
    "at",
    "workspace",
    "verb",
    "actor_kind",
    "actor_user_id",
    "actor_label",
    "target_type",
    "target_id",
    "target_label",
    "via",
    "ip",
    "changes",
)
FIELDS = tuple("workspace__slug" if c == "workspace" else c for c in COLUMNS)
FORMATS = ("jsonl", "csv")
CONTENT_TYPES = {"jsonl": "application/x-ndjson; charset=utf-8", "csv": "text/csv; charset=utf-8"}
CHUNK_ROWS = 2000
# A spreadsheet runs a cell that starts with one of these as a formula (OWASP's CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _rows(queryset) -> Iterator[dict]:
    for values in queryset.order_by("at", "id").values_list(*FIELDS).iterator(chunk_size=CHUNK_ROWS):
        row = dict(zip(COLUMNS, values, strict=True))
        row["at"] = row["at"].isoformat()
        yield row


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        value = json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True)
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _jsonl(queryset) -> Iterator[str]:
    for row in _rows(queryset):
        yield json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False) + "\n"


def _csv(queryset) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for row in _rows(queryset):
        writer.writerow([_cell(row[c]) for c in COLUMNS])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()  # the header, when there is no row


def audit_export_lines(queryset, *, format: str) -> Iterator[str]:
    """The events of `queryset` (already scoped), oldest first, one text line each."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; one of {', '.join(FORMATS)}")
    return _jsonl(queryset) if format == "jsonl" else _csv(queryset)


def audit_export_chunks(queryset, *, format: str, rows: int = 500) -> Iterator[str]:
    """The same lines joined `rows` at a time: fewer, larger writes to a response."""
    batch = []
    for line in audit_export_lines(queryset, format=format):
        batch.append(line)
        if len(batch) >= rows:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)
