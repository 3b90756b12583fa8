"""What send_file's race-free open costs: open_beneath against realpath + open.

    .venv/bin/python bench/safe_open.py [calls]

Both open and close one file, 2 and 4 directories deep in a session directory, and one
reached through a symlink; the baseline is what send_file did before (realpath, a
containment check, os.open with O_NOFOLLOW, fstat). Prints p50/p99 in microseconds.
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.services.paths import open_beneath  # noqa: E402


def realpath_open(path: str, root: str) -> None:
    real = os.path.realpath(os.path.join(root, path))
    if not (real + os.sep).startswith(os.path.realpath(root) + os.sep):
        raise ValueError("outside")
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    os.fstat(fd)
    os.close(fd)


def safe_open(path: str, root: str, temp: str) -> None:
    os.close(open_beneath(path, roots=[root, temp], base=root).fd)


def timed(fn, calls: int) -> list[float]:
    for _ in range(200):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as base:
        root, temp = os.path.join(base, "session"), os.path.join(base, "tmp")
        os.makedirs(os.path.join(root, "a", "b", "c"))
        os.makedirs(temp)
        for rel in ("a/report.txt", "a/b/c/report.txt"):
            Path(root, rel).write_text("report")
        os.symlink("a/b/c", os.path.join(root, "link"))
        print(f"{calls} opens each, p50 / p99 in microseconds\n")
        print(f"{'path':<22}{'realpath+open':>16}{'open_beneath':>16}{'extra p50':>12}")
        for path in ("a/report.txt", "a/b/c/report.txt", "link/report.txt"):
            old = timed(lambda p=path: realpath_open(p, root), calls)
            new = timed(lambda p=path: safe_open(p, root, temp), calls)

            def fmt(s):
                q = statistics.quantiles(s, n=100)
                return f"{statistics.median(s):.1f} / {q[98]:.1f}"

            extra = statistics.median(new) - statistics.median(old)
            print(f"{path:<22}{fmt(old):>16}{fmt(new):>16}{extra:>10.1f} us")


if __name__ == "__main__":
    main()
