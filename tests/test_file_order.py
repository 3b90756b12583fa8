"""The suite's file order for the parallel run (tests/file_order.py): longest files first."""

import json
from types import SimpleNamespace

from tests.file_order import file_durations, longest_files_first


def items(*nodeids):
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def ids(ordered):
    return [i.nodeid for i in ordered]


def test_files_go_longest_first_each_kept_whole_and_in_its_own_order():
    collected = items("a.py::one", "a.py::two", "b.py::one", "c.py::one", "c.py::two")
    durations = {"a.py": 5.0, "b.py": 300.0, "c.py": 40.0}
    assert ids(longest_files_first(collected, durations)) == [
        "b.py::one",
        "c.py::one",
        "c.py::two",
        "a.py::one",
        "a.py::two",
    ]


def test_a_file_without_a_record_counts_as_the_median_file():
    collected = items("new.py::t", "slow.py::t", "mid.py::t", "quick.py::t")
    durations = {"slow.py": 100.0, "mid.py": 10.0, "quick.py": 1.0}
    assert ids(longest_files_first(collected, durations)) == ["slow.py::t", "new.py::t", "mid.py::t", "quick.py::t"]


def test_without_a_record_pytests_order_stands(tmp_path):
    collected = items("z.py::t", "a.py::t")
    assert ids(longest_files_first(collected, {})) == ["z.py::t", "a.py::t"]
    broken = tmp_path / "durations.json"
    broken.write_text("[not a mapping")
    assert file_durations(broken) == {}
    broken.write_text(json.dumps(["a list"]))
    assert file_durations(broken) == {}


def test_the_record_is_read_as_seconds_per_file(tmp_path):
    record = tmp_path / "durations.json"
    record.write_text(json.dumps({"tests/test_x.py": 12, "tests/test_y.py": "3.5"}))
    assert file_durations(record) == {"tests/test_x.py": 12.0, "tests/test_y.py": 3.5}
