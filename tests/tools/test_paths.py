"""open_beneath on its own: every way out of the roots is refused, every way within works.

No database and no server: the walk is pure `os`, and these run in milliseconds (the
mutation tester runs them once per mutant).
"""

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from tools.services.paths import PathRefused, open_beneath, size_problem


@pytest.fixture
def tree(tmp_path):
    """session/ and temp/ are the roots; outside/ is not."""
    session, temp, outside = tmp_path / "session", tmp_path / "temp", tmp_path / "outside"
    for directory in (session / "sub" / "deep", temp, outside):
        directory.mkdir(parents=True)
    (session / "top.txt").write_text("top")
    (session / "sub" / "deep" / "f.txt").write_text("deep")
    (temp / "t.log").write_text("temp")
    (outside / "secret.txt").write_text("outside")
    return session, temp, outside


def read(tree, path: str) -> tuple[str, str]:
    session, temp, _ = tree
    opened = open_beneath(path, roots=[str(session), str(temp)], base=str(session))
    with os.fdopen(opened.fd, "rb") as handle:
        data = handle.read().decode()
    assert opened.size == len(data)
    return data, opened.name


def refusal(tree, path: str) -> str:
    with pytest.raises(PathRefused) as caught:
        read(tree, path)
    return str(caught.value)


def test_relative_absolute_and_temp_paths(tree):
    session, temp, _ = tree
    assert read(tree, "top.txt") == ("top", "top.txt")
    assert read(tree, "./sub/./deep/f.txt") == ("deep", "f.txt")
    assert read(tree, "sub//deep/f.txt") == ("deep", "f.txt")
    assert read(tree, str(session / "sub" / "deep" / "f.txt")) == ("deep", "f.txt")
    assert read(tree, str(temp / "t.log")) == ("temp", "t.log")
    assert read(tree, "sub/deep/../../top.txt") == ("top", "top.txt")


def test_dotdot_cannot_climb_above_a_root(tree):
    session, temp, _ = tree
    outside = "is outside the session directory and the system temp directory"
    assert refusal(tree, "../outside/secret.txt").endswith(outside)
    assert refusal(tree, "sub/../../outside/secret.txt").endswith(outside)
    assert outside in refusal(tree, str(session) + "/../outside/secret.txt")
    assert outside in refusal(tree, str(temp) + "/../session/top.txt")  # not even into the other root
    assert outside in refusal(tree, "..")


def test_absolute_paths_are_matched_by_component_not_by_prefix(tree):
    session, _, _ = tree
    sibling = Path(str(session) + "-other")
    sibling.mkdir()
    (sibling / "x.txt").write_text("sibling")
    assert "is outside" in refusal(tree, str(sibling / "x.txt"))
    assert "is outside" in refusal(tree, "/etc/passwd")


def test_a_root_given_through_a_symlink_matches_its_real_path(tree, tmp_path):
    session, temp, _ = tree
    alias = tmp_path / "alias"
    alias.symlink_to(session)
    opened = open_beneath(str(session / "top.txt"), roots=[str(alias), str(temp)], base=str(alias))
    os.close(opened.fd)
    assert opened.name == "top.txt"


def test_symlinks_inside_are_followed(tree):
    session, temp, _ = tree
    (session / "rel").symlink_to("sub/deep")
    (session / "abs").symlink_to(session / "sub")
    (session / "to-temp").symlink_to(temp / "t.log")
    (session / "sub" / "up").symlink_to("../top.txt")
    assert read(tree, "rel/f.txt") == ("deep", "f.txt")
    assert read(tree, "abs/deep/f.txt") == ("deep", "f.txt")
    assert read(tree, "to-temp") == ("temp", "t.log")
    assert read(tree, "sub/up") == ("top", "top.txt")
    assert read(tree, "rel/../deep/f.txt") == ("deep", "f.txt")  # .. of the link's target, as the kernel does


def test_symlinks_out_are_refused_wherever_they_are(tree):
    session, _, outside = tree
    (session / "out-abs").symlink_to(outside / "secret.txt")
    (session / "out-dir").symlink_to(outside)
    (session / "sub" / "out-rel").symlink_to("../../outside/secret.txt")
    (session / "etc").symlink_to("/etc")
    for path in ("out-abs", "out-dir/secret.txt", "sub/out-rel", "etc/passwd"):
        assert "is outside" in refusal(tree, path), path


def test_symlink_loops_and_chains_are_bounded(tree):
    session, _, _ = tree
    (session / "a").symlink_to("b")
    (session / "b").symlink_to("a")
    assert refusal(tree, "a") == "cannot open a: too many levels of symbolic links"
    previous, kernels_limit = "top.txt", 40  # the number, not the module's constant: a test of it
    for i in range(kernels_limit):
        (session / f"l{i}").symlink_to(previous)
        previous = f"l{i}"
    assert read(tree, f"l{kernels_limit - 1}") == ("top", "top.txt")  # exactly the limit: fine
    (session / "one-more").symlink_to(previous)
    assert "too many levels" in refusal(tree, "one-more")


def test_what_is_not_a_regular_file(tree):
    session, _, _ = tree
    os.mkfifo(session / "fifo")
    assert refusal(tree, "fifo") == "fifo is not a regular file"
    assert refusal(tree, "sub") == "sub is not a regular file"
    assert refusal(tree, "sub/deep/..") == "sub/deep/.. is not a regular file"
    assert refusal(tree, ".") == ". is not a regular file"
    assert refusal(tree, "") == " is not a regular file"
    assert refusal(tree, "top.txt/") == "top.txt/ is not a regular file"


def test_missing_and_misused_names(tree):
    assert refusal(tree, "nothing.txt") == "no file at nothing.txt"
    assert refusal(tree, "top.txt/x") == "no file at top.txt/x"
    assert refusal(tree, "top.txt/..") == "no file at top.txt/.."
    assert refusal(tree, "nodir/x.txt") == "no file at nodir/x.txt"
    assert refusal(tree, "a\x00b") == "the path contains a NUL character"


def test_a_missing_root_is_a_clear_refusal(tree, tmp_path):
    with pytest.raises(PathRefused, match="its directory is not available"):
        open_beneath("x", roots=[str(tmp_path / "gone")], base=str(tmp_path / "gone"))


def test_no_descriptor_is_leaked(tree):
    session, _, _ = tree
    (session / "loop").symlink_to("loop")
    before = len(os.listdir("/proc/self/fd"))
    for path in ("top.txt", "nothing", "../x", "loop", "sub", "sub/deep/f.txt/x"):
        try:
            os.close(read_fd(tree, path))
        except PathRefused:
            pass
    assert len(os.listdir("/proc/self/fd")) == before


def read_fd(tree, path: str) -> int:
    session, temp, _ = tree
    return open_beneath(path, roots=[str(session), str(temp)], base=str(session)).fd


def _failing_open(monkeypatch, fails, error: OSError):
    real_open = os.open

    def fake(path, flags, *args, **kwargs):
        if fails(str(path)):
            raise error
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake)


def test_a_file_that_cannot_be_reopened_for_reading_is_a_clear_refusal(tree, monkeypatch):
    """The O_PATH descriptor is reopened through /proc; if that fails (no /proc, or a mode
    that forbids reading), the agent hears why."""
    _failing_open(monkeypatch, lambda p: p.startswith("/proc/self/fd/"), PermissionError(13, "Permission denied"))
    assert refusal(tree, "top.txt") == "cannot open top.txt: Permission denied"


def test_other_errors_of_a_step_are_named(tree, monkeypatch):
    _failing_open(monkeypatch, lambda p: p == "sub", OSError(5, "Input/output error"))
    assert refusal(tree, "sub/deep/f.txt") == "cannot open sub/deep/f.txt: Input/output error"


def test_an_error_without_a_description_still_says_something(tree, monkeypatch):
    _failing_open(monkeypatch, lambda p: p == "sub", OSError("stale handle"))
    assert refusal(tree, "sub/deep/f.txt") == "cannot open sub/deep/f.txt: stale handle"


HARD_LINK = "is a hard link to a file that may lie outside the session directory"


def test_a_hard_link_to_a_file_outside_is_refused(tree):
    session, temp, outside = tree
    os.link(outside / "secret.txt", session / "hv")
    os.link(outside / "secret.txt", temp / "hv.log")
    assert refusal(tree, "hv") == f"hv {HARD_LINK}"
    assert refusal(tree, str(temp / "hv.log")) == f"{temp / 'hv.log'} {HARD_LINK}"


def test_a_file_linked_twice_inside_is_refused_by_either_name(tree):
    session, _, _ = tree
    os.link(session / "top.txt", session / "sub" / "again.txt")
    assert refusal(tree, "top.txt") == f"top.txt {HARD_LINK}"
    assert refusal(tree, "sub/again.txt") == f"sub/again.txt {HARD_LINK}"


def test_a_symlink_to_a_hard_link_is_judged_by_the_file_it_reaches(tree):
    """The link count is the opened inode's, not the symlink's: the name shown is the one asked for."""
    session, _, outside = tree
    os.link(outside / "secret.txt", session / "hv")
    (session / "innocent").symlink_to("hv")
    assert refusal(tree, "innocent") == f"innocent {HARD_LINK}"


def test_a_file_whose_other_name_is_gone_is_ordinary_again(tree):
    session, _, _ = tree
    os.link(session / "top.txt", session / "copy.txt")
    os.unlink(session / "top.txt")
    assert read(tree, "copy.txt") == ("top", "copy.txt")


def _on_regular_fstats(monkeypatch, *actions):
    """os.fstat that runs actions[n] around the n-th fstat of a regular file: before it
    (the name changes between the open and that fstat), and returns what it saw."""
    real_fstat, seen = os.fstat, []

    def fstat(fd):
        if stat.S_ISREG(real_fstat(fd).st_mode) and len(seen) < len(actions):
            actions[len(seen)]()
            seen.append(real_fstat(fd).st_nlink)
            return real_fstat(fd)
        return real_fstat(fd)

    monkeypatch.setattr(os, "fstat", fstat)
    return seen


def test_an_inside_name_removed_after_the_open_is_refused(tree, monkeypatch):
    """hv is opened while it and the outside name both exist; hv is removed before the fstat,
    so the inode has one link, the outside one: the name check after the fstat refuses it."""
    session, _, outside = tree
    os.link(outside / "secret.txt", session / "hv")
    seen = _on_regular_fstats(monkeypatch, lambda: os.unlink(session / "hv"))
    assert refusal(tree, "hv") == "cannot open hv: it changed while it was opened"
    assert seen == [1]


def test_an_inside_name_replaced_by_another_file_after_the_open_is_refused(tree, monkeypatch):
    session, _, outside = tree
    os.link(outside / "secret.txt", session / "hv")

    def replace():
        os.unlink(session / "hv")
        (session / "hv").write_text("a new file, one link")

    _on_regular_fstats(monkeypatch, replace)
    assert refusal(tree, "hv") == "cannot open hv: it changed while it was opened"


def test_an_inside_name_replaced_by_a_symlink_to_the_outside_name_is_refused(tree, monkeypatch):
    """After the open, hv becomes a symlink to the outside name: the outside inode then has one
    link, and a stat that followed the name would find that very inode. The name is not
    followed: it is no longer the file that was opened."""
    session, _, outside = tree
    os.link(outside / "secret.txt", session / "hv")

    def to_symlink():
        os.unlink(session / "hv")
        (session / "hv").symlink_to(outside / "secret.txt")

    _on_regular_fstats(monkeypatch, to_symlink)
    assert refusal(tree, "hv") == "cannot open hv: it changed while it was opened"


def test_an_inside_name_removed_and_linked_again_is_refused(tree, monkeypatch):
    """Removed before the walk's fstat, linked again after the judge's: both fstats say one
    link, the stat of the name after them sees two."""
    session, _, outside = tree
    os.link(outside / "secret.txt", session / "hv")
    seen = _on_regular_fstats(monkeypatch, lambda: os.unlink(session / "hv"), lambda: None)
    real_stat = os.stat

    def stat_after_relink(path, *args, **kwargs):
        if path == "hv" and not (session / "hv").exists():
            os.link(outside / "secret.txt", session / "hv")
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat_after_relink)
    assert refusal(tree, "hv") == f"hv {HARD_LINK}"
    assert seen == [1, 1]


def test_the_size_limit_is_the_seeds_100_mib_exactly():
    limit = 100 * 1024 * 1024  # seed 000's number, not the module's constant
    assert size_problem(limit, "big.bin") is None
    assert size_problem(limit + 1, "big.bin") == "big.bin is larger than 100 MiB, the limit"
    assert size_problem(0, "e.txt") == "e.txt is empty"
    assert size_problem(1, "one.txt") is None


def test_an_opened_file_cannot_be_changed_after_the_walk(tree):
    """What the walk judged (descriptor, name, size) is what the caller gets: no later code can
    swap the descriptor of a judged file for another."""
    session, temp, _ = tree
    opened = open_beneath("top.txt", roots=[str(session), str(temp)], base=str(session))
    try:
        with pytest.raises(dataclasses.FrozenInstanceError):
            opened.fd = 0
    finally:
        os.close(opened.fd)
