"""manage.py workspace_definition export <slug> [--format toml|yaml] [-o FILE]
manage.py workspace_definition import <slug> FILE [--format toml|yaml]   (FILE "-": standard input)

An import replaces the workspace's repositories with the file's, or, when any entry has a
problem, prints every problem and changes nothing (exit status 1).
"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from calvin.audit.context import audit_origin
from calvin.workspaces.definitions import FORMATS, MAX_BYTES, DefinitionInvalid, definition_export, definition_import
from calvin.workspaces.models import Workspace

SUFFIXES = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}


class Command(BaseCommand):
    help = "Export or import a workspace's definition (its repositories) as TOML or YAML."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        export = actions.add_parser("export", help="Print or write the definition.")
        export.add_argument("slug")
        export.add_argument("--format", choices=FORMATS, help="Default: from -o's suffix, else toml.")
        export.add_argument("-o", "--output", help="Write to this file instead of standard output.")
        load = actions.add_parser("import", help="Replace the repositories with the file's.")
        load.add_argument("slug")
        load.add_argument("file", help="The definition file, or - for standard input.")
        load.add_argument("--format", choices=FORMATS, help="Default: from the file's suffix, else toml.")

    def handle(self, *args, action, slug, **options):
        workspace = Workspace.objects.filter(slug=slug).first()
        if workspace is None:
            raise CommandError(f"no workspace with the slug {slug!r}")
        if action == "export":
            self._export(workspace, options["output"], options["format"])
        else:
            self._import(workspace, options["file"], options["format"])

    def _export(self, workspace, output, fmt):
        fmt = fmt or SUFFIXES.get(Path(output or "").suffix.lower(), "toml")
        text = definition_export(workspace=workspace, format=fmt)
        if output:
            Path(output).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")

    def _import(self, workspace, file, fmt):
        fmt = fmt or SUFFIXES.get(Path(file).suffix.lower(), "toml")
        try:
            if file == "-":
                data = sys.stdin.buffer.read(MAX_BYTES + 1)
            else:
                with open(file, "rb") as handle:
                    data = handle.read(MAX_BYTES + 1)  # one byte more than allowed: the import says it is too big
        except OSError as error:
            raise CommandError(f"cannot read {file}: {error.strerror}") from None
        try:
            with audit_origin(via="cli"):
                summary = definition_import(workspace=workspace, text=data, format=fmt)
        except DefinitionInvalid as refused:
            for problem in refused.problems:
                self.stderr.write(problem)
            count = len(refused.problems)
            raise CommandError(f"{count} problem{'s' if count != 1 else ''}; nothing was changed") from None
        self.stdout.write(f"{workspace.slug}: {summary}")
