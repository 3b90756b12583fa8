"""Bench fixtures in Calvin's database: one member, and sessions each with a runner token.

Run by bench/run.py with the bench environment (DATABASE_URL etc.):
    python bench/setup_calvin.py <sessions> <out.json>

runner_start revokes a session's earlier runners, so every token gets its own session
(and thread); each token carries the per-runner budgets (50 post_card, 50 send_file).
"""

import json
import os
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

from calvin.workspaces.models import Member  # noqa: E402
from calvin.workspaces.services import workspace_create  # noqa: E402
from sessions.services import runner_start, session_start  # noqa: E402

FILE_NAME = "bench.txt"


def main(count: int, out: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    user = get_user_model().objects.create_user(f"bench-{tag}", password=uuid.uuid4().hex)
    workspace = workspace_create(name=f"Bench {tag}", slug=f"bench-{tag}", owner_user=user)
    member = Member.objects.get(workspace=workspace, user=user)
    runners = []
    for i in range(count):
        session = session_start(workspace=workspace, owner=member, title=f"bench {tag} {i}")
        _, token = runner_start(session=session)
        (Path(session.directory) / FILE_NAME).write_text(f"bench file for session {session.id}\n")
        runners.append({"token": token, "session_id": session.id, "thread_id": session.thread_id})
    # A logged-in browser session for the websocket (AuthMiddlewareStack reads this cookie).
    browser = Client()
    browser.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    out.write_text(json.dumps({"runners": runners, "cookie": cookie, "file": FILE_NAME}))


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
