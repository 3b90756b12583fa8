"""Start Calvin on one machine: web, worker and beat, with a demo session ready to use."""

import json
import signal
import subprocess
import sys
import threading

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from calvin.workspaces.services import demo_ensure
from sessions.management.commands.issue_token import mcp_json_for
from sessions.services import runner_start


class Command(BaseCommand):
    help = "Migrate, prepare a demo session, and run web + worker + beat for one machine."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, host, port, **options):
        call_command("migrate", interactive=False, verbosity=0)
        demo = demo_ensure()
        runner, token = runner_start(session=demo.session, host="localhost")
        base = settings.CALVIN_PUBLIC_URL.rstrip("/") or f"http://{host}:{port}"
        snippet = mcp_json_for(url=f"{base}/mcp", token=token)
        (settings.VAR_DIR / "demo.mcp.json").write_text(json.dumps(snippet, indent=2))
        (settings.VAR_DIR / "demo.mcp.json").chmod(0o600)

        embedded = settings.EMBEDDED
        password = demo.admin_password or "(set at first start; change it with: python manage.py changepassword admin)"
        self.stdout.write(
            "\n".join(
                [
                    f"Calvin is starting ({'embedded: SQLite/in-memory' if embedded else 'PostgreSQL + Redis'},"
                    f" mode {settings.CALVIN_MODE}).",
                    f"Dashboard:   {base}/",
                    f"Admin:       {base}/admin/  user: {demo.admin_username}  password: {password}",
                    f"Demo thread: {base}/threads/{demo.session.thread_id}/",
                    f".mcp.json for Claude Code (also in {settings.VAR_DIR / 'demo.mcp.json'}):",
                    json.dumps(snippet, indent=2),
                    "",
                ]
            )
        )
        self.stdout.flush()
        children = [] if embedded else self._spawn_worker_and_beat()
        if embedded:
            self._start_embedded_worker_and_beat()
        # uvicorn re-raises SIGTERM once it has shut down; turn it into an exit that runs `finally`.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            uvicorn.run("calvin.asgi:application", host=host, port=port, lifespan="on", log_level="info")
        finally:
            for child in children:
                child.terminate()
            for child in children:
                child.wait(timeout=10)

    def _spawn_worker_and_beat(self) -> list[subprocess.Popen]:
        celery = [sys.executable, "-m", "celery", "-A", "calvin"]
        return [
            subprocess.Popen(
                [*celery, "worker", "-l", "info", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE], cwd=settings.BASE_DIR
            ),
            subprocess.Popen([*celery, "beat", "-l", "info"], cwd=settings.BASE_DIR),
        ]

    def _start_embedded_worker_and_beat(self) -> None:
        # The in-memory broker only reaches consumers in this process: worker and beat live here.
        from celery.beat import Service

        from calvin.celery import app

        worker = app.Worker(
            pool="solo",
            concurrency=1,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            queues=[settings.CELERY_TASK_DEFAULT_QUEUE],
            loglevel="INFO",
        )
        threading.Thread(target=worker.start, name="celery-worker", daemon=True).start()
        beat = Service(app, scheduler_cls=settings.CELERY_BEAT_SCHEDULER)
        threading.Thread(target=beat.start, name="celery-beat", daemon=True).start()
