"""python manage.py tool_tables [--write]: the README's tool tables from the servers' own schemas."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from tools.tables import readme_with_tool_tables, tool_tables


class Command(BaseCommand):
    help = "Print the tool tables (parameters and availability per mode), or write them into README.md."

    def add_arguments(self, parser):
        parser.add_argument("--write", action="store_true", help="replace the block in README.md")

    def handle(self, *args, write: bool = False, **options):
        if not write:
            self.stdout.write(tool_tables())
            return
        readme = Path(settings.BASE_DIR) / "README.md"
        readme.write_text(readme_with_tool_tables(readme.read_text(encoding="utf-8")), encoding="utf-8")
        self.stdout.write(f"wrote the tool tables into {readme}")
