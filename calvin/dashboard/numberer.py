"""Numbering and pushing a stream's live events after commit, off the committing caller's path.

A tool call used to number its workspace stream's event and push it before it answered: five
statements and a push, more than the call's own write. Here the commit only names the stream;
one thread per process numbers every stream named since its last pass (many streams and
events, one transaction, under load) and pushes the frames. Nothing waits on it and nothing is
lost if the process dies first: the events are committed unnumbered, and the next caller for the stream (an
event, a page's catch-up, a socket's periodic look) numbers them (calvin/dashboard/live.py).
"""

import logging
import threading
from collections.abc import Callable

from django.db import close_old_connections, connection

log = logging.getLogger(__name__)

# The thread keeps its database connection this long after its last pass, then closes it.
IDLE_SECONDS = 1.0


class StreamNumberer:
    def __init__(self, work: Callable[[list[str]], None]):
        self._work = work
        self._waiting: dict[str, None] = {}  # ordered: streams are numbered in the order named
        self._busy = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def request(self, stream: str) -> None:
        with self._changed:
            self._waiting[stream] = None
            self._changed.notify_all()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="live-numberer", daemon=True)
                self._thread.start()

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every stream named so far was numbered (tests; a process that stops)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._waiting and not self._busy, timeout=timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Number what is named, then end the thread and its connection (a database being dropped
        waits for none of it); a later request starts it again."""
        self.drain(timeout)
        with self._changed:
            thread, self._thread = self._thread, None
            self._changed.notify_all()
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        me = threading.current_thread()
        try:
            while self._pass(me):
                pass
        finally:
            connection.close()

    def _pass(self, me: threading.Thread) -> bool:
        """Number the streams named since the last pass; False once this thread was stopped."""
        with self._changed:
            self._changed.wait_for(lambda: self._waiting or self._thread is not me, timeout=IDLE_SECONDS)
            if self._thread is not me:
                return False
            if not self._waiting:
                connection.close()  # idle: its next pass connects again
                return True
            streams, self._waiting, self._busy = list(self._waiting), {}, True
        try:
            close_old_connections()
            self._number(streams)
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()
        return True

    def _number(self, streams: list[str]) -> None:
        """All of the pass's streams in one go; if that fails, each on its own, so one stream's
        trouble holds up none of the others."""
        try:
            self._work(streams)
            return
        except Exception:
            if len(streams) == 1:
                log.warning("live events of a %s stream could not be numbered", streams[0].split(":")[0], exc_info=True)
            connection.close()  # a broken connection is not reused
        if len(streams) == 1:
            return  # committed already: the stream's next caller numbers what is left
        for stream in streams:
            self._number([stream])
