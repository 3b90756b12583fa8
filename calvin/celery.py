import logging
import os
import random
import threading

from celery import Celery, Task
from celery.signals import celeryd_init, task_postrun, task_prerun, worker_ready, worker_shutdown
from django.db import InterfaceError, OperationalError, close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "calvin.settings")

# What a lost or restarting database raises (psycopg's closed connection, a terminated backend,
# a refused connect; a deadlock too): the task ran in a transaction that rolled back, so running
# it again is what finishes it.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
# Backoff for those: 0.5 s, 1 s, 2 s ... capped at 10 s, with jitter, about five minutes in all;
# after that the rows the task would have changed are still there for the sweeps.
DATABASE_RETRY_FIRST_SECONDS = 0.5
DATABASE_RETRY_MAX_SECONDS = 10.0
DATABASE_RETRY_ATTEMPTS = 35


class CalvinTask(Task):
    """Every Calvin task: a database connection error is retried with backoff, not dropped.

    A sweep says `retry_database_errors=False`: beat runs it again on its next tick anyway."""

    retry_database_errors = True

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except DATABASE_UNAVAILABLE as exc:
            if not self.retry_database_errors or self.request.is_eager:
                raise
            backoff = min(DATABASE_RETRY_MAX_SECONDS, DATABASE_RETRY_FIRST_SECONDS * 2**self.request.retries)
            logging.getLogger(__name__).warning("%s: the database is unavailable (%s); retrying", self.name, exc)
            countdown = backoff * random.uniform(0.5, 1.0)
            raise self.retry(exc=exc, countdown=countdown, max_retries=DATABASE_RETRY_ATTEMPTS) from exc


app = Celery("calvin", task_cls=CalvinTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _drop_broken_connections(**_):
    """Around every task, as Django does around every request: a connection that raised a
    database error (its server restarted) or outlived CONN_MAX_AGE is closed, so the next query
    connects afresh. Celery's own fix-up skips this while CELERY_DB_REUSE_MAX is set, and without
    it a worker keeps its dead connection after a PostgreSQL restart and fails every task."""
    close_old_connections()


_beat_stop = threading.Event()


@worker_ready.connect
def _note_worker(sender=None, **_):
    """The worker notes itself in Redis while it runs, for /readyz and `manage.py workers`."""
    from calvin.workers import worker_beat_start

    _beat_stop.clear()
    worker_beat_start(hostname=sender.hostname, stop=_beat_stop)


@worker_shutdown.connect
def _forget_worker(sender=None, **_):
    from calvin.workers import worker_forget

    _beat_stop.set()
    worker_forget(hostname=sender.hostname)


@celeryd_init.connect
def _private_files(**_):
    """A `celery worker` process (not the tests' in-process worker) makes its files private,
    as the web processes do (calvin/private_files.py)."""
    from calvin.private_files import gateway_umask_set

    gateway_umask_set()


def queue_on_commit(task, *args) -> None:
    """Queue `task(*args)` once the current transaction commits (a rolled-back change
    queues nothing). No broker retries in the request: a publish that fails is logged,
    and the caller's state is what a later sweep or the next change works from."""
    from django.db import transaction

    def publish():
        try:
            task.apply_async(args, retry=False)
        except Exception:
            logging.getLogger(__name__).warning("could not queue %s%r", task.name, args, exc_info=True)

    transaction.on_commit(publish)
