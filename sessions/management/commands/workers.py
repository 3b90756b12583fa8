"""`manage.py workers`: the Celery workers heard in the last minute; exits 1 when there are none
(a check for cron or a monitoring agent)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from calvin.workers import ANSWERED_WITHIN_SECONDS, workers_answered


class Command(BaseCommand):
    help = "List the Celery workers heard in the last minute; exit 1 when none was."

    def handle(self, *args, **options):
        if not settings.REDIS_URL:
            self.stdout.write("Embedded mode (no REDIS_URL): the worker runs inside `up`; nothing to count.")
            return
        try:
            seen = workers_answered()
        except Exception as exc:  # noqa: BLE001 - said in words, not a traceback
            raise CommandError(f"Redis could not be read: {type(exc).__name__}") from None
        for name, ago in sorted(seen.items()):
            self.stdout.write(f"{name}\theard {ago:.0f} s ago")
        if not seen:
            raise CommandError(f"no worker was heard in the last {ANSWERED_WITHIN_SECONDS:.0f} s")
        self.stdout.write(f"{len(seen)} worker(s) answering on queue {settings.CELERY_TASK_DEFAULT_QUEUE}")
