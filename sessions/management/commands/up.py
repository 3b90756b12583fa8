"""Start Calvin on one machine: web, worker and beat, with a demo session ready to use."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from calvin.chat.slack.installations import slack_setup_lines
from calvin.http_server import add_proxy_arguments, trusted_proxies_from, uvicorn_config
from calvin.private_files import gateway_umask_set, private_modes_ensure
from secrets_vault.crypto import new_key
from sessions.demo import demo_agent_ensure, demo_ensure, demo_preview_ensure
from sessions.hosts import host_create, host_token_reset
from sessions.management.commands.issue_token import mcp_json_for
from sessions.models import Host
from sessions.services import runner_start
from tools.availability import HOSTED

LOCAL_HOST = "local"


def claude_code_logged_in() -> bool:
    """A `claude` on PATH with a login: then the demo agent is Claude Code, else a script."""
    return bool(shutil.which("claude")) and (Path.home() / ".claude" / ".credentials.json").is_file()


def local_host_token() -> str:
    """The host `up` runs beside the gateway; a new token each start (the last one dies with it)."""
    host = Host.objects.filter(name=LOCAL_HOST).first()
    if host is None:
        return host_create(name=LOCAL_HOST)[1]
    return host_token_reset(host=host)


# Celery warns against a worker running as root; on the machine `up` was started on, that
# adds nothing and would scroll the printed block away.
ROOT_WARNING = "ignore:You're running the worker with superuser privileges"


def vault_key_ensure(var_dir: Path) -> Path | None:
    """Without SP_STORE_KEY, generate a vault key into var_dir/vault_key so secrets work on a
    laptop; the settings of every process started with this var dir then read it. Returns the
    file when it was made now; an existing file is never replaced (its secrets need it)."""
    if settings.SP_STORE_KEY:
        return None
    path = var_dir / "vault_key"
    key = new_key()
    try:
        # Created with mode 0600 (O_EXCL: never over another file), so never readable by others.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Made by another process since our settings loaded (an empty file stays as it is).
        settings.SP_STORE_KEY = [existing] if (existing := path.read_text().strip()) else []
        return None
    with os.fdopen(fd, "w") as file:
        file.write(key + "\n")
    settings.SP_STORE_KEY = [key]
    return path


class Command(BaseCommand):
    help = "Migrate, prepare a demo session, and run web + worker + beat for one machine."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        add_proxy_arguments(parser)  # as calvin.http_server: no forwarded header is trusted unless proxies are named

    def handle(self, *args, host, port, proxy_headers, forwarded_allow_ips, **options):
        try:
            trusted_proxies = trusted_proxies_from(proxy_headers=proxy_headers, forwarded_allow_ips=forwarded_allow_ips)
        except ValueError as problem:
            raise CommandError(str(problem)) from None
        # Before anything is written: the database, keys, logs and stored files are private.
        self.operator_umask = gateway_umask_set()
        private_modes_ensure(
            var_dir=settings.VAR_DIR,
            directories=[settings.MEDIA_ROOT, settings.CALVIN_SESSIONS_DIR, settings.CALVIN_SESSIONS_TMP_DIR],
        )
        # Only the embedded install invents a key: a scaled deployment sets SP_STORE_KEY (and a
        # hosted one with DATABASE_URL does not start without it).
        made = vault_key_ensure(settings.VAR_DIR) if settings.EMBEDDED else None
        if made:
            self.stdout.write(
                f"Generated a key for secrets in {made} (mode 0600): back it up with the database."
                " In production set SP_STORE_KEY instead (python manage.py vault_key makes one)."
            )
        call_command("migrate", interactive=False, verbosity=0)
        # A password is shown only to a terminal: a log file must not hold a working one.
        demo = demo_ensure(can_show_password=self.stdout.isatty())
        claude_code = claude_code_logged_in()
        talk = demo_agent_ensure(workspace=demo.workspace, owner=demo.session.owner, claude_code=claude_code)
        preview = demo_preview_ensure(workspace=demo.workspace, owner=demo.session.owner)
        runner, token = runner_start(session=demo.session)  # the demo token is issued: no host may end it
        base = settings.CALVIN_PUBLIC_URL.rstrip("/") or f"http://{host}:{port}"
        # Links agents are given (a spawned thread, a read_thread URL) point where this gateway listens.
        settings.CALVIN_PUBLIC_URL = base
        snippet = mcp_json_for(url=base, token=token, tool_sets=demo.session.agent.tool_sets)
        (settings.VAR_DIR / "demo.mcp.json").write_text(json.dumps(snippet, indent=2))
        (settings.VAR_DIR / "demo.mcp.json").chmod(0o600)
        block = self._block(demo=demo, base=base, snippet=snippet, talk=talk, preview=preview, claude_code=claude_code)
        host_token = local_host_token()

        self._quiet_chatter()
        children = [] if settings.EMBEDDED else self._spawn_worker_and_beat()
        children.append(self._spawn_host(base=f"http://{host}:{port}", token=host_token))
        if settings.EMBEDDED:
            self._start_embedded_worker_and_beat()
        # From here on uvicorn, worker and beat log only warnings and errors, and the block
        # is printed once the server listens: it stays the last thing on screen.
        server = uvicorn.Server(
            uvicorn_config(host=host, port=port, trusted_proxies=trusted_proxies, log_level="warning")
        )
        threading.Thread(target=self._announce, args=(server, block), name="announce", daemon=True).start()
        # uvicorn re-raises SIGTERM once it has shut down; turn it into an exit that runs `finally`.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            server.run()
        finally:
            for child in children:
                child.terminate()
            for child in children:
                child.wait(timeout=10)
        if not server.started:
            raise CommandError(f"the web server did not start on {host}:{port} (see above)")

    def _spawn_host(self, *, base: str, token: str) -> subprocess.Popen:
        """The local host daemon: it dials the gateway like any other host (the token travels
        in its environment, never on its command line)."""
        manage = str(settings.BASE_DIR / "manage.py")
        environment = {**os.environ, "CALVIN_HOST_TOKEN": token}
        return subprocess.Popen(
            [sys.executable, manage, "host", "--gateway", base, "--name", LOCAL_HOST],
            cwd=settings.BASE_DIR,
            env=environment,
            umask=self.operator_umask,  # not the gateway's: the host's files are read by agents' users
            stdout=subprocess.DEVNULL,
            stderr=open(settings.VAR_DIR / "host.log", "ab"),  # the child keeps it open
        )

    def _block(self, *, demo, base: str, snippet: dict, talk, preview=None, claude_code: bool) -> str:
        admin = f"Admin:       {base}/admin/  user: {demo.admin_username}"
        set_password = f"{sys.executable} {settings.BASE_DIR / 'manage.py'} changepassword {demo.admin_username}"
        below = "\n" + " " * 13
        if demo.admin_password:
            admin += f"  password: {demo.admin_password}"
        elif demo.admin_has_password:
            admin += f"  (password set earlier){below}change it with: {set_password}"
        else:
            admin += f"  (no password yet: one is made only on a terminal){below}set one with: {set_password}"
        return "\n".join(
            [
                f"Calvin is starting ({'embedded: SQLite/in-memory' if settings.EMBEDDED else 'PostgreSQL + Redis'},"
                f" mode {settings.CALVIN_MODE}).",
                f"Dashboard:   {base}/",
                admin,
                f"Sign up:     {base}/accounts/signup/  (without EMAIL_URL, verification and invitation"
                " emails are printed here, links included)",
                f"Talk to an agent: {base}/threads/{talk.thread_id}/  (write a message; the demo agent is "
                + ("Claude Code" if claude_code else "a script: log in to Claude Code here and restart for a real one")
                + ")",
                *(
                    [
                        f"See a preview: {base}/threads/{preview.thread_id}/  (send any message; the agent answers"
                        f" with a preview URL, a page it serves from its sandbox{self._preview_note()})"
                    ]
                    if preview is not None
                    else []
                ),
                f"Your own agent's thread: {base}/threads/{demo.session.thread_id}/",
                f".mcp.json for running Claude Code yourself (also in {settings.VAR_DIR / 'demo.mcp.json'}):",
                json.dumps(snippet, indent=2),
                *slack_setup_lines(base),
                "Calvin is running. Stop it with Ctrl+C.",
                "",
            ]
        )

    def _preview_note(self) -> str:
        if settings.CALVIN_MODE == HOSTED:  # the only mode that serves previews (tools/availability.py)
            return ""
        # The agent's answer would say so too; the printout says it first, and how to get one.
        return f"; mode {settings.CALVIN_MODE} serves none: start with CALVIN_MODE=hosted for one"

    def _announce(self, server: uvicorn.Server, block: str) -> None:
        while not server.started:
            if server.should_exit:
                return
            time.sleep(0.05)
        self.stdout.write(block)
        self.stdout.flush()

    def _quiet_chatter(self) -> None:
        # Only warnings and errors from task runs, beat ticks and each login's lockout reset:
        # INFO lines there would scroll the block away. On these loggers, not the root:
        # loading the ASGI app applies Django's LOGGING again, root level included.
        for name in ("celery", "django_celery_beat", "axes"):
            logging.getLogger(name).setLevel(logging.WARNING)
        # memory:// has no host; kombu would warn about that on every connection.
        logging.getLogger("kombu.connection").setLevel(logging.ERROR)

    def _spawn_worker_and_beat(self) -> list[subprocess.Popen]:
        celery = [sys.executable, "-W", ROOT_WARNING, "-m", "celery", "-A", "calvin", "--quiet"]  # no banners
        return [
            subprocess.Popen(
                [*celery, "worker", "-l", "warning", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE], cwd=settings.BASE_DIR
            ),
            subprocess.Popen([*celery, "beat", "-l", "warning"], cwd=settings.BASE_DIR),
        ]

    def _start_embedded_worker_and_beat(self) -> None:
        # The in-memory broker only reaches consumers in this process: worker and beat live here.
        from celery.beat import Service

        from calvin.celery import app

        warnings.filterwarnings("ignore", message=ROOT_WARNING.removeprefix("ignore:"))
        worker = app.Worker(
            pool="solo",
            concurrency=1,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            queues=[settings.CELERY_TASK_DEFAULT_QUEUE],
            loglevel="WARNING",
            quiet=True,  # no banner
            redirect_stdouts=False,
        )
        threading.Thread(target=worker.start, name="celery-worker", daemon=True).start()
        beat = Service(app, scheduler_cls=settings.CELERY_BEAT_SCHEDULER)
        threading.Thread(target=beat.start, name="celery-beat", daemon=True).start()
