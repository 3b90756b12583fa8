"""Ports for the servers tests start.

bind(("127.0.0.1", 0)) hands out a port from the kernel's ephemeral range and forgets it at
once: before the test's server binds it, another xdist worker's bind(0) (a Slack stand-in, a
preview upstream) may be handed the same port, and the test talks to that server instead (CI
saw a login page answered by the Slack stand-in). So these ports come from below the ephemeral
range, from a slice of its own for each xdist worker, where nothing else is handed ports.
"""

import itertools
import os
import socket
from pathlib import Path

SLICE = 400
_counter = itertools.count()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice_start() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw-1").removeprefix("gw")
    index = int(worker) + 1 if worker.lstrip("-").isdigit() else 0
    low = _ephemeral_low()
    slices = max(1, (low - 10000) // SLICE)
    return low - SLICE * (1 + index % slices)


def free_port() -> int:
    start = _slice_start()
    for _ in range(SLICE):
        port = start + next(_counter) % SLICE
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # still held (a server of an earlier test in this worker)
            return port
    raise RuntimeError(f"no free port in {start}..{start + SLICE - 1}")
