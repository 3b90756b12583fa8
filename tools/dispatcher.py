"""The worker's side of the outbox on PostgreSQL: the row is the queue.

A tool call used to publish a Celery message per call after its commit (kombu builds the message,
one Redis write), and the worker paid a message's bookkeeping per effect. Here the call's own
INSERT statement sends `pg_notify` (delivered when it commits, never for a rollback), and one
thread per worker process LISTENs, claims new pending calls in batches with one statement
(`FOR UPDATE SKIP LOCKED`: any number of workers, each row claimed once) and applies them in
id order, each in its own transaction (tools.effects.tool_calls_apply_claimed). It also looks
every POLL_SECONDS without being told, so a notification missed while its connection was down
loses nothing.

Only rows nobody claimed yet are its own (`claimed_at IS NULL`); a call put back for later (an
edit waiting for its send, a platform's temporary error, the sweep's re-queue) goes through the
Celery task `tools.tasks.apply_tool_call`, which keeps its countdown and backoff. On SQLite (the
embedded mode) there is no LISTEN: calls publish that task, as before.
"""

import contextlib
import logging
import threading
from collections.abc import Iterator

from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutdown
from django.db import close_old_connections, connection, connections

from calvin.celery import DATABASE_UNAVAILABLE

log = logging.getLogger(__name__)

CHANNEL = "calvin_tool_calls"
BATCH = 16  # small enough that a worker killed mid-batch leaves few calls to the stuck sweep
POLL_SECONDS = 2.0
RECONNECT_SECONDS = (0.5, 10.0)  # first and largest wait before listening again


def supported() -> bool:
    return connection.vendor == "postgresql"


class EffectDispatcher:
    def __init__(self, *, batch: int = BATCH, poll_seconds: float = POLL_SECONDS):
        self.batch = batch
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._claiming = threading.Lock()  # held while a batch is claimed and applied
        self._thread: threading.Thread | None = None
        # (ids, the claim's stamp) of a batch cut short by a lost database: what of it is not applied
        # is given back on the next drain
        self._unfinished: tuple[list[int], object] | None = None
        self.listening = threading.Event()  # set while its LISTEN connection is up

    def start(self) -> bool:
        """Start the thread (once); False where there is nothing to listen to (SQLite)."""
        if not supported():
            return False
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="effect-dispatcher", daemon=True)
            self._thread.start()
        return True

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No claims while inside (a test that orders two effects itself); a batch being
        applied is finished first."""
        with self._claiming:
            yield

    def drain(self) -> int:
        """Claim and apply new calls until none is left; how many were claimed."""
        from tools.effects import tool_calls_apply_claimed, tool_calls_claim_new, tool_calls_unclaim

        done = 0
        while not self._stop.is_set():
            with self._claiming:
                close_old_connections()
                if self._unfinished:  # a batch the database went away under: new again
                    tool_calls_unclaim(ids=self._unfinished[0], claimed_at=self._unfinished[1])
                    self._unfinished = None
                ids, claimed_at = tool_calls_claim_new(limit=self.batch)
                try:
                    if ids:
                        tool_calls_apply_claimed(ids=ids)
                except DATABASE_UNAVAILABLE:
                    self._unfinished = (ids, claimed_at)
                    raise
            done += len(ids)
            if len(ids) < self.batch:
                break
        return done

    def _run(self) -> None:
        wait = RECONNECT_SECONDS[0]
        try:
            while not self._stop.is_set():
                try:
                    with self._listening() as listener:
                        wait = RECONNECT_SECONDS[0]
                        self._serve(listener)
                except DATABASE_UNAVAILABLE + (OSError,) as exc:
                    log.warning("effect dispatcher: the database is unavailable (%s); listening again", exc)
                except Exception:
                    log.exception("effect dispatcher failed; starting again")
                self.listening.clear()
                connection.close()  # its next pass connects afresh
                self._stop.wait(wait)
                wait = min(wait * 2, RECONNECT_SECONDS[1])
        finally:
            connection.close()

    @contextlib.contextmanager
    def _listening(self):
        wrapper = connections["default"]
        raw = wrapper.get_new_connection(wrapper.get_connection_params())
        try:
            raw.autocommit = True
            raw.execute(f"LISTEN {CHANNEL}")
            self.listening.set()
            yield raw
        finally:
            with contextlib.suppress(Exception):
                raw.close()

    def _serve(self, listener) -> None:
        self.drain()  # what was committed while nobody listened
        while not self._stop.is_set():
            told = any(True for _ in listener.notifies(timeout=self.poll_seconds, stop_after=1))
            if told:
                # Many calls, many notifications: take all that came, then one drain for them.
                for _ in listener.notifies(timeout=0.0):
                    pass
            self.drain()


DISPATCHER = EffectDispatcher()


# Started by `celery worker` (the tests' in-process worker starts it itself): in the worker's
# process, unless its pool forks children that do the work; then in each child, so effects run
# in parallel as tasks do. A child's thread ends with it (a daemon).


@worker_ready.connect
def _start_in_worker(sender=None, **_):
    if type(getattr(sender, "pool", None)).__module__ != "celery.concurrency.prefork":
        DISPATCHER.start()


def _start_in_pool_child(**_):
    DISPATCHER.start()


@worker_init.connect
def _start_in_pool_children(**_):
    """Celery's Django fix-up closes the connections a pool child inherited, in a receiver of
    worker_process_init, with `os.close` on their descriptors and then again through the driver.
    A thread already opening sockets could be handed a recycled descriptor number between the
    two closes and lose it (CI saw a solo worker die of EBADF). So the dispatcher starts from a
    receiver connected here, after the fix-up's own (connected by its worker_init receiver):
    signals call receivers in the order they were connected. The solo pool sends the signal
    too, in the worker's own process."""
    worker_process_init.connect(_start_in_pool_child, weak=False, dispatch_uid="calvin-effect-dispatcher")


@worker_shutdown.connect
def _stop(**_):
    DISPATCHER.stop()
