"""manage.py audit_export --workspace SLUG [--since YYYY-MM-DD] [--until YYYY-MM-DD]
[--format jsonl|csv] [--output FILE]: one workspace's audit log, streamed."""

import re
from datetime import date

from django.core.management.base import BaseCommand, CommandError

from calvin.audit.export import FORMATS, audit_export_chunks
from calvin.audit.models import AuditEvent
from calvin.audit.selectors import audit_events_between

DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _day(value: str | None, option: str) -> date | None:
    if value is None:
        return None
    try:
        if DAY_RE.fullmatch(value):
            return date.fromisoformat(value)
    except ValueError:
        pass
    raise CommandError(f"{option} takes a day as YYYY-MM-DD, not {value[:40]!r}")


class Command(BaseCommand):
    help = "Export one workspace's audit events (oldest first) as JSON lines or CSV."

    def add_arguments(self, parser):
        parser.add_argument("--workspace", required=True, help="the workspace's slug")
        parser.add_argument("--since", help="first day included, YYYY-MM-DD")
        parser.add_argument("--until", help="last day included, YYYY-MM-DD")
        parser.add_argument("--format", choices=FORMATS, default="jsonl")
        parser.add_argument("--output", help="a file to write (default: standard output)")

    def handle(self, *args, workspace, since, until, format, output, **options):
        from calvin.workspaces.models import Workspace

        found = Workspace.objects.filter(slug=workspace).first() if "\x00" not in workspace else None
        if found is None:
            raise CommandError(f"there is no workspace {workspace[:80]!r}")
        first, last = _day(since, "--since"), _day(until, "--until")
        if first and last and last < first:
            raise CommandError("--until is before --since")
        events = audit_events_between(AuditEvent.objects.filter(workspace=found), since=first, until=last)
        chunks = audit_export_chunks(events, format=format)
        if not output:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            return
        try:
            with open(output, "w", encoding="utf-8", newline="") as stream:
                for chunk in chunks:
                    stream.write(chunk)
        except OSError as exc:
            raise CommandError(f"cannot write {output}: {exc.strerror}") from None
        self.stderr.write(f"Wrote {found.slug}'s audit events to {output}.")
