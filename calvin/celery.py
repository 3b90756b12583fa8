import logging
import os

from celery import Celery
from celery.signals import celeryd_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "calvin.settings")

app = Celery("calvin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
