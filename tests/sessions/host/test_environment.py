"""Environment builds on the host: real npm and apt, into a prefix under the test's directory."""

import asyncio
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from sessions.host import environment as env
from sessions.host.environment import built_version, environment_ensure
from tools.services.agents import package_problems

MISSING_NPM = "left-pad-nonexistent-calvin-0f3a"


def ensure(prefix: Path, version: int, *, apt=(), npm=(), **kwargs) -> env.EnvironmentResult:
    return asyncio.run(environment_ensure(prefix=prefix, version=version, apt=list(apt), npm=list(npm), **kwargs))


def run_from(bin_dirs: list[str], name: str, *args: str) -> str:
    """Run a command found only on bin_dirs (never the machine's own PATH)."""
    path = shutil.which(name, path=os.pathsep.join(bin_dirs))
    assert path, f"{name} is not on {bin_dirs}"
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie waits for a reaper that may not exist in a container


def lock_file(prefix: Path) -> Path:
    return prefix.parent / "env.lock"


def leftovers(prefix: Path) -> list[str]:
    return sorted(p.name for p in prefix.glob(".build-*"))


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    return tmp_path / "agents" / "agent-1" / "env"


@pytest.fixture
def runs(monkeypatch) -> list[list[str]]:
    """The argv of every subprocess a build starts (they still run)."""
    calls = []
    real = env._run

    async def recording(argv, *args, **kwargs):
        calls.append(argv)
        return await real(argv, *args, **kwargs)

    monkeypatch.setattr(env, "_run", recording)
    return calls


def test_npm_package_runs_from_the_bin_dirs_and_the_same_version_is_not_built_again(prefix, runs):
    result = ensure(prefix, 2, npm=["semver"])
    assert result.ok and result.version == 2 and result.error == ""
    assert run_from(result.bin_dirs, "semver", "1.2.3", "-i", "minor") == "1.3.0"
    assert runs[0][:2] == ["npm", "install"] and "--ignore-scripts" in runs[0] and runs[0][-2:] == ["--", "semver"]
    assert os.readlink(prefix / "current") == "v2"
    mode = stat.S_IMODE((prefix / "v2").stat().st_mode)
    assert mode & 0o055 == 0o055, "an agent running as another user must be able to read its environment"

    # The path before every start: no subprocess, not even the build lock (its file is not made again).
    runs.clear()
    lock_file(prefix).unlink()
    again = ensure(prefix, 2, npm=["semver"])
    assert again == result and runs == [] and not lock_file(prefix).exists()


def test_nothing_to_build_makes_no_directory(prefix, runs):
    result = ensure(prefix, 1)
    assert result.ok and result.version == 1 and result.bin_dirs == []
    assert runs == [] and not prefix.exists()


def test_a_stale_caller_keeps_the_newer_environment(prefix, runs):
    assert ensure(prefix, 3, npm=["semver"]).ok
    runs.clear()
    lock_file(prefix).unlink()
    stale = ensure(prefix, 2, npm=[])  # an older snapshot of the agent: packages are only ever added
    assert stale.ok and stale.version == 3 and runs == [] and not lock_file(prefix).exists()
    assert run_from(stale.bin_dirs, "semver", "2.0.0") == "2.0.0"


def test_a_failed_build_keeps_the_previous_environment(prefix, runs):
    assert ensure(prefix, 1, npm=["semver"]).ok
    failed = ensure(prefix, 2, npm=["semver", MISSING_NPM])
    assert not failed.ok and failed.version == 1
    assert failed.error.startswith("npm could not install") and MISSING_NPM in failed.error and "404" in failed.error
    assert "complete log" not in failed.error  # npm's pointer to a host file tells the agent nothing
    assert run_from(failed.bin_dirs, "semver", "1.0.0") == "1.0.0"
    assert built_version(prefix) == 1 and leftovers(prefix) == [] and not (prefix / "v2").exists()

    # The same version is not tried again at once (an outage would cost every start the timeout)...
    runs.clear()
    soon = ensure(prefix, 2, npm=["semver", MISSING_NPM])
    assert soon == failed and runs == []
    # ...but is after retry_after, and a newer version builds at once.
    assert not ensure(prefix, 2, npm=["semver", MISSING_NPM], retry_after=0).ok and len(runs) == 1
    fixed = ensure(prefix, 3, npm=["semver"])
    assert fixed.ok and fixed.version == 3 and not (prefix / env.FAILED).exists()


def test_an_apt_package_that_does_not_exist_is_named(prefix):
    failed = ensure(prefix, 2, apt=["calvin-no-such-package"])
    assert not failed.ok and failed.version == 0 and failed.bin_dirs == []
    assert failed.error.startswith("apt could not fetch calvin-no-such-package")
    assert "Unable to locate package calvin-no-such-package" in failed.error
    assert leftovers(prefix) == [] and not (prefix / "current").exists()


def test_an_interrupted_build_keeps_the_previous_environment_and_kills_its_processes(prefix, monkeypatch, tmp_path):
    assert ensure(prefix, 1, npm=["semver"]).ok
    pid_file = tmp_path / "pid"
    real = env._run

    async def slow(argv, deadline, **kwargs):
        return await real(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], deadline)

    monkeypatch.setattr(env, "_run", slow)

    async def interrupt():
        task = asyncio.create_task(environment_ensure(prefix=prefix, version=2, apt=[], npm=["cowsay"]))
        while not pid_file.exists() or not pid_file.read_text().strip():
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(interrupt())
    assert time.monotonic() - started < 10, "the build's child outlived the cancel, holding its output pipe"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 15  # a loaded 2-CPU CI runner can take seconds to end a killed group
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the build's process group outlived the cancelled build"
    assert built_version(prefix) == 1 and leftovers(prefix) == []
    assert run_from(env.environment_bin_dirs(prefix), "semver", "1.0.0") == "1.0.0"


def test_a_timeout_kills_the_process_group_and_output_is_bounded():
    async def run(argv, seconds):
        return await env._run(argv, asyncio.get_running_loop().time() + seconds)

    started = time.monotonic()
    code, output = asyncio.run(run(["sh", "-c", "sleep 60 & echo $!; wait"], 0.5))
    assert code is None and time.monotonic() - started < 10, "the child kept its output pipe open"
    deadline = time.monotonic() + 5
    while alive(int(output.split()[0])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(int(output.split()[0])), "a timeout must kill the whole process group"

    # A child that left the group (setsid) survives the kill and holds the pipe: the build still ends.
    started = time.monotonic()
    code, output = asyncio.run(run(["sh", "-c", "setsid sleep 60 & echo $!; wait"], 0.5))
    escaped = int(output.split()[0])
    os.kill(escaped, signal.SIGKILL)  # ours: started by this test
    assert code is None and time.monotonic() - started < 5, "the wait must not depend on who holds the pipe"

    code, output = asyncio.run(run(["sh", "-c", "yes 0123456789 | head -c 1000000"], 30))
    assert code == 0 and 0 < len(output) <= env.OUTPUT_KEEP
    text = env._failed_text("npm could not install", ["semver"], 1, output)
    assert text.startswith("npm could not install semver (exit status 1):") and len(text) < env.ERROR_TAIL + 100
    assert env._failed_text("npm could not install", ["semver"], None, "").endswith("(it did not finish in time)")


HOSTILE = ["--prefix=/etc", "a;rm -rf /", "$(id)", "semver@7", "semver\n", "Semver", "-", "a b", "x" * 215]


@pytest.mark.parametrize("kind", ["apt", "npm"])
@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_is_refused_before_anything_runs(tmp_path, prefix, runs, kind, name):
    result = ensure(prefix, 2, **{kind: ["semver", name]})
    assert not result.ok and result.version == 0 and result.bin_dirs == []
    assert result.error.startswith("packages refused:") and f"invalid {kind} package name" in result.error
    assert ascii(name)[:80] in result.error and "'semver'" not in result.error
    assert runs == [] and list(tmp_path.iterdir()) == []  # not even the prefix or its lock


def test_too_many_names_are_refused(prefix, runs):
    result = ensure(prefix, 2, npm=[f"p{i}" for i in range(env.PACKAGES_MAX + 1)])
    assert not result.ok and "at most 200 packages" in result.error and runs == []


@pytest.mark.parametrize("name", [*HOSTILE, "semver", "@scope/pkg", "g++", "libc6.1", "a.b_c-d", "@Scope/x", "_a"])
def test_names_are_checked_as_install_packages_checks_them(name):
    """The host takes no name the gateway refuses (an @version suffix included), and refuses none it takes."""
    for apt, npm in (([name], []), ([], [name])):
        assert bool(env.name_problems(apt, npm)) == bool(package_problems(apt, npm)), (name, apt, npm)


def test_concurrent_builds_of_one_prefix_build_once(prefix, runs):
    async def both():
        build = environment_ensure(prefix=prefix, version=2, apt=[], npm=["semver"])
        return await asyncio.gather(build, environment_ensure(prefix=prefix, version=2, apt=[], npm=["semver"]))

    first, second = asyncio.run(both())
    assert first.ok and second.ok and first.version == second.version == 2
    assert len(runs) == 1
    assert run_from(second.bin_dirs, "semver", "3.0.0") == "3.0.0"


def test_leftovers_of_an_interrupted_build_are_cleared(prefix):
    (prefix / ".build-v2-old").mkdir(parents=True)
    (prefix / ".build-v2-old" / "junk").write_text("x")
    (prefix / "v2" / "npm").mkdir(parents=True)  # renamed, then the host died before the swap
    (prefix / "v2" / "npm" / "junk").write_text("x")
    result = ensure(prefix, 2, npm=["semver"])
    assert result.ok and leftovers(prefix) == [] and not (prefix / "v2" / "npm" / "junk").exists()
    assert run_from(result.bin_dirs, "semver", "1.0.0") == "1.0.0"


def test_only_the_current_and_previous_versions_are_kept(prefix):
    for version in (1, 2, 3):
        assert ensure(prefix, version, npm=["semver"]).ok
    assert sorted(p.name for p in prefix.iterdir()) == ["current", "v2", "v3"]


@pytest.fixture
def apt_index():
    """A fresh machine may have no package lists yet: fetch them only then."""
    if subprocess.run(["apt-cache", "show", "sl"], capture_output=True).returncode != 0:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run([*sudo, "apt-get", "-q", "update"], check=True, capture_output=True, timeout=600)
    if subprocess.run(["dpkg", "-s", "sl"], capture_output=True).returncode == 0:
        pytest.skip("sl is installed on this machine: apt would download nothing")


def test_an_apt_package_is_unpacked_into_the_prefix_without_installing_it(prefix, apt_index, runs):
    result = ensure(prefix, 2, apt=["sl"])
    assert result.ok and result.version == 2, result.error
    fetch, unpack = runs
    assert fetch[:3] == ["apt-get", "install", "--download-only"] and fetch[-2:] == ["--", "sl"]
    assert "Debug::NoLocking=1" in fetch and unpack[:3] == ["dpkg-deb", "-x", "--"]
    binary = prefix / "current" / "apt" / "usr" / "games" / "sl"
    assert binary.is_file() and os.access(binary, os.X_OK)
    assert shutil.which("sl", path=os.pathsep.join(result.bin_dirs)) == str(binary)
    # Unpacked, not installed: dpkg knows nothing of it and no archive is left behind.
    assert subprocess.run(["dpkg", "-s", "sl"], capture_output=True).returncode != 0
    assert not list((prefix / "v2").glob(".debs"))


def test_set_id_bits_are_dropped_from_unpacked_files(prefix, monkeypatch, tmp_path):
    """A package's setuid binary keeps no bit in the prefix (unpacked as root, dpkg-deb would keep it)."""
    package = tmp_path / "pkg"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text(
        "Package: calvin-suid\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n"
    )
    tool = package / "usr" / "bin" / "calvin-suid"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o6755)
    real = env._run

    async def fetched_locally(argv, deadline, **kwargs):
        if argv[0] != "apt-get":
            return await real(argv, deadline, **kwargs)
        archives = next(a.split("=", 1)[1] for a in argv if a.startswith("Dir::Cache::archives="))
        return await real(["dpkg-deb", "--root-owner-group", "-b", str(package), archives], deadline)

    monkeypatch.setattr(env, "_run", fetched_locally)
    result = ensure(prefix, 2, apt=["calvin-suid"])
    assert result.ok, result.error
    unpacked = prefix / "current" / "apt" / "usr" / "bin" / "calvin-suid"
    assert stat.S_IMODE(unpacked.stat().st_mode) == 0o755
    assert run_from(result.bin_dirs, "calvin-suid") == "hi"
