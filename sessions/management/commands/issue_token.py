"""Issue a runner token for a session (a new runner generation). The token is shown once."""

import json

from django.core.management.base import BaseCommand, CommandError

from sessions.models import Session
from sessions.services import runner_start


class Command(BaseCommand):
    help = "Start a new runner generation for a session and print its bearer token (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("session", type=int, help="Session id")
        parser.add_argument("--host", default="localhost", help="The runner's host name")
        parser.add_argument("--url", default="http://127.0.0.1:8000/mcp", help="Gateway MCP URL for --mcp-json")
        parser.add_argument("--mcp-json", action="store_true", help="Print a .mcp.json for Claude Code instead")

    def handle(self, *args, session, host, url, mcp_json, **options):
        try:
            target = Session.objects.get(id=session)
        except Session.DoesNotExist:
            raise CommandError(f"no session {session}") from None
        runner, token = runner_start(session=target, host=host)
        if mcp_json:
            self.stdout.write(json.dumps(mcp_json_for(url=url, token=token), indent=2))
        else:
            self.stdout.write(token)
        self.stderr.write(
            f"runner {runner.id}, generation {runner.generation}; earlier tokens of this session are revoked"
        )


def mcp_json_for(*, url: str, token: str) -> dict:
    return {"mcpServers": {"calvin": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}}
