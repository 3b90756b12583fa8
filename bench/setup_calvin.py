"""Bench fixtures in Calvin's database: one member, and sessions each with a runner token.

Run by bench/run.py with the bench environment (DATABASE_URL, the vault key etc.):
    python bench/setup_calvin.py <sessions> <out.json> [<sessions with secrets>]

runner_start revokes a session's earlier runners, so every token gets its own session
(and thread); each token carries the per-runner budgets (50 post_card, 50 send_file).
The sessions with secrets (listed apart, as "secret_runners") each hold SECRETS_PER_SESSION
session-level secrets, so every outbound call of theirs is checked against them; their values
are random and differ from session to session, so each session's scanner is its own. The
other sessions have none in scope (the bench sets no workspace- or agent-level secret).
With secrets, one more such session is the "secret_probe", whose fixture carries one of its
values: run.py posts it once (untimed) to see the check refuse it before timing anything.
"""

import json
import os
import secrets
import string
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "calvin.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402

from calvin.workspaces.models import Member, Quota  # noqa: E402
from calvin.workspaces.services import workspace_create  # noqa: E402
from secrets_vault.services import secret_set, session_secret_pairs  # noqa: E402
from sessions.services import runner_start, session_start  # noqa: E402

FILE_NAME = "bench.txt"
SECRETS_PER_SESSION = 10
URLSAFE = string.ascii_letters + string.digits + "-_"


def secret_value() -> str:
    """Like an API key or token: 24 to 64 random urlsafe characters."""
    return "".join(secrets.choice(URLSAFE) for _ in range(24 + secrets.randbelow(41)))


def main(count: int, out: Path, with_secrets: int = 0) -> None:
    tag = uuid.uuid4().hex[:8]
    user = get_user_model().objects.create_user(f"bench-{tag}", password=uuid.uuid4().hex)
    workspace = workspace_create(name=f"Bench {tag}", slug=f"bench-{tag}", owner_user=user)
    member = Member.objects.get(workspace=workspace, user=user)
    # A full run makes about 12 000 calls in this one workspace: more than the default tool
    # calls per day. Each call is still counted (the bench measures that); none is refused.
    Quota.objects.filter(workspace=workspace).update(tool_calls_per_day=1_000_000)

    def runner(i: int, secret_count: int = 0) -> tuple[dict, list[str]]:
        """A session with `secret_count` session-level secrets and a runner token: (fixture, values)."""
        session = session_start(workspace=workspace, owner=member, title=f"bench {tag} {i}")
        values = [secret_value() for _ in range(secret_count)]
        for n, value in enumerate(values):
            secret_set(session=session, name=f"SECRET_{n}", value=value)
        # What the outbound check will read back (decrypted with the bench's vault key).
        in_scope = session_secret_pairs(session_id=session.id, workspace_id=workspace.id)
        if len(in_scope) != secret_count:
            raise RuntimeError(f"session {session.id}: {len(in_scope)} secrets in scope, not {secret_count}")
        _, token = runner_start(session=session)
        (Path(session.directory) / FILE_NAME).write_text(f"bench file for session {session.id}\n")
        return {"token": token, "session_id": session.id, "thread_id": session.thread_id}, values

    runners = [runner(i)[0] for i in range(count)]
    secret_runners = [runner(count + i, SECRETS_PER_SESSION)[0] for i in range(with_secrets)]
    probe = None
    if with_secrets:
        entry, values = runner(count + with_secrets, SECRETS_PER_SESSION)
        probe = {**entry, "secret_name": "SECRET_0", "secret_value": values[0]}
    # A logged-in browser session for the websocket (AuthMiddlewareStack reads this cookie).
    browser = Client()
    browser.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    out.write_text(
        json.dumps(
            {
                "runners": runners,
                "secret_runners": secret_runners,
                "secrets_per_session": SECRETS_PER_SESSION,
                "secret_probe": probe,
                "cookie": cookie,
                "file": FILE_NAME,
            }
        )
    )


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
