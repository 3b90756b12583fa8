"""Put on a worker's PYTHONPATH: logs, as Celery's Django fix-up closes a pool child's inherited
database descriptors, whether an effect dispatcher thread is already running in that process
(it must not be: it could be handed a descriptor number the fix-up closes a second time)."""

import sys
import threading

from celery.fixups.django import DjangoWorkerFixup

_close_inherited = DjangoWorkerFixup.on_worker_process_init


def _probed(self, **kwargs):
    running = any(thread.name == "effect-dispatcher" for thread in threading.enumerate())
    sys.stdout.write(f"fixup-probe: dispatcher running while descriptors close: {running}\n")
    sys.stdout.flush()
    return _close_inherited(self, **kwargs)


DjangoWorkerFixup.on_worker_process_init = _probed
