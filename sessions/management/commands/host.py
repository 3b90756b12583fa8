"""python manage.py host: the daemon that runs this machine's agents (sessions/host/daemon.py)."""

import asyncio
import logging
import signal
import socket
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions.host.daemon import HostDaemon, HostRefused, HostUnsandboxed


class Command(BaseCommand):
    help = "Run this machine's agents: dial out to the gateway with a host token and run the turns it assigns."

    def add_arguments(self, parser):
        parser.add_argument("--gateway", default=settings.CALVIN_GATEWAY_URL, help="the gateway's base URL")
        parser.add_argument("--name", default=settings.CALVIN_HOST_NAME or socket.gethostname())
        parser.add_argument("--capacity", type=int, default=settings.CALVIN_HOST_CAPACITY, help="sessions at once")
        parser.add_argument("--dir", default=str(settings.CALVIN_HOST_DIR), help="session directories live here")
        parser.add_argument(
            "--token-file", help="read the host token from this file (else CALVIN_HOST_TOKEN; never on argv)"
        )
        parser.add_argument(
            "--agent-user",
            default=f"{settings.CALVIN_AGENT_UID}:{settings.CALVIN_AGENT_GID}",
            help="UID:GID agents run as when this daemon runs as root (CALVIN_AGENT_UID/GID; default nobody)",
        )

    def handle(self, *args, gateway, name, capacity, dir, token_file, agent_user, **options):
        token = Path(token_file).read_text().strip() if token_file else settings.CALVIN_HOST_TOKEN
        if not token:
            raise CommandError("no host token: make one in the admin (Hosts) and set CALVIN_HOST_TOKEN")
        agent_uid, agent_gid = _agent_user(agent_user)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s host %(levelname)s %(message)s")
        state_dir = Path(dir).resolve()
        home = Path.home()
        # Agents must not see the gateway's files (`up` keeps its database and keys in var/)
        # nor this user's home, unless Calvin or its Python is installed there.
        hide = [settings.VAR_DIR.resolve()]
        needed = (settings.BASE_DIR.resolve(), Path(sys.executable).resolve())
        if not any(path.is_relative_to(home) for path in needed):
            hide.append(home)
        daemon = HostDaemon(
            gateway=gateway,
            token=token,
            name=name,
            capacity=capacity,
            state_dir=state_dir,
            hide=hide,
            agent_uid=agent_uid,
            agent_gid=agent_gid,
            allow_unsandboxed=settings.CALVIN_ALLOW_UNSANDBOXED,
        )
        try:
            asyncio.run(self._run(daemon))
        except HostRefused as exc:
            raise CommandError(f"the gateway refused this host: {exc}") from None
        except HostUnsandboxed as exc:
            raise CommandError(f"this host does not run agents: {exc}") from None

    async def _run(self, daemon: HostDaemon) -> None:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        serving = asyncio.create_task(daemon.run())
        stop = asyncio.create_task(stopping.wait())
        done, _ = await asyncio.wait({serving, stop}, return_when=asyncio.FIRST_COMPLETED)
        await daemon.close()
        serving.cancel()
        if serving in done:
            serving.result()  # HostRefused, or a crash


def _agent_user(text: str) -> tuple[int, int]:
    uid, _, gid = str(text).partition(":")
    try:
        ids = int(uid), int(gid or uid)
    except ValueError:
        raise CommandError(f"--agent-user is UID:GID in numbers (e.g. 65534:65534), not {text!r}") from None
    if min(ids) <= 0:
        raise CommandError(f"agents never run as root or with a negative id: --agent-user {text!r}")
    return ids
