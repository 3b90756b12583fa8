import json

from django.conf import settings
from django.core.management.base import BaseCommand

from calvin.chat.slack.manifest import slack_manifest


class Command(BaseCommand):
    help = "Print the Slack app manifest (JSON) for this gateway's public URL."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="", help="The gateway's public base URL (default CALVIN_PUBLIC_URL).")
        parser.add_argument("--name", default="Calvin", help="The app's and the bot's name in Slack.")

    def handle(self, *args, url: str, name: str, **options):
        base = url or getattr(settings, "CALVIN_PUBLIC_URL", "") or "http://localhost:8000"
        self.stdout.write(json.dumps(slack_manifest(base_url=base, name=name), indent=2))
