"""The longest test files first, so a parallel run does not end waiting on one long file.

pytest-xdist's `--dist loadfile` hands a worker one whole file at a time, in the order the files
were collected (scripts/test passes `--no-loadscope-reorder`: xdist's own order is by number of
tests, and the slowest files here are fault experiments of a few long tests). A long file
collected last held the run's end while the other workers sat idle; longest first (the classic
longest-processing-time rule) leaves short files to fill the gaps at the end.

tests/durations.json holds each file's seconds from a measured run (`scripts/test-durations
<junit.xml>` writes it); a file not in it counts as the median file, so a new file neither
jumps the queue nor waits for the end. Within a file the order is pytest's.
"""

import json
import statistics
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")


def file_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        return {str(name): float(seconds) for name, seconds in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}  # no record (or a broken one): pytest's own order


def longest_files_first(items: list, durations: dict[str, float]) -> list:
    """`items` (anything with a `nodeid`) regrouped by file, the longest file first; stable."""
    if not durations:
        return list(items)
    unknown = statistics.median(durations.values())
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered = sorted(files, key=lambda name: -durations.get(name, unknown))  # sorted() is stable
    return [item for name in ordered for item in files[name]]


def pytest_collection_modifyitems(session, config, items):
    items[:] = longest_files_first(items, file_durations())
