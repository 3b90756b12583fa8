"""Issue a runner token for a session (a new runner generation). The token is shown once."""

import json

from django.core.management.base import BaseCommand, CommandError

from sessions.models import Session
from sessions.services import runner_start


class Command(BaseCommand):
    help = "Start a new runner generation for a session and print its bearer token (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("session", type=int, help="Session id")
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="The gateway's base URL, for --mcp-json")
        parser.add_argument("--mcp-json", action="store_true", help="Print a .mcp.json for Claude Code instead")

    def handle(self, *args, session, url, mcp_json, **options):
        try:
            target = Session.objects.get(id=session)
        except Session.DoesNotExist:
            raise CommandError(f"no session {session}") from None
        runner, token = runner_start(session=target)  # no host's: none of them may end it
        if mcp_json:
            tool_sets = target.agent.tool_sets if target.agent else None
            self.stdout.write(json.dumps(mcp_json_for(url=url, token=token, tool_sets=tool_sets), indent=2))
        else:
            self.stdout.write(token)
        self.stderr.write(
            f"runner {runner.id}, generation {runner.generation}; earlier tokens of this session are revoked"
        )


def mcp_json_for(*, url: str, token: str, tool_sets=None) -> dict:
    """One entry per tool set the session is given, all with the same token. `url` is the
    gateway's base URL (a trailing /mcp is accepted too)."""
    from tools.server import PATHS

    base = url.rstrip("/").removesuffix("/mcp")
    headers = {"Authorization": f"Bearer {token}"}
    return {
        "mcpServers": {
            name: {"type": "http", "url": base + path, "headers": headers}
            for name, path in PATHS.items()
            if tool_sets is None or name in tool_sets
        }
    }
