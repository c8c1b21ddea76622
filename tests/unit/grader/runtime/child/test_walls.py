"""`grader.runtime.child.walls`, proven on real bubblewrap (and a few of its
parts directly): who a worker is, what it shares
with the next one, and that nothing it starts outlives it.

Each test grades a toy submission whose one probe, ``look``, reports what the learner's code
can reach (a listing, a file's text, or the name of the error it met), through a judge that
hands the report back as its message (the runner and toy suite are
``tests/unit/grader/runtime/conftest.py``'s). Nothing is mocked: the servers are the ones a
class is graded with, walled in by bubblewrap (the tests are skipped where it cannot be raised).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import Runner, Suite, load_suite
from grader.runtime import sandbox
from grader.runtime.child.walls import UID_BASE, WallError, mapped_bytes, mount
from grader.runtime.results import Outcome
from tests.conftest import ROOT
from tests.unit.grader.runtime.conftest import WALLED
from tests.unit.grader.runtime.conftest import look_around as seen_by_a_worker
from tests.unit.grader.runtime.test_runner import leftovers
from workbook import siblings
from workbook.shared.manifest import Entry
from workbook.shared.manifest import TestSpec as Spec


@pytest.fixture
def runner(walled_runner: Runner) -> Runner:
    return walled_runner


@pytest.fixture
def suite(walled_suite: Suite) -> Suite:
    return walled_suite


@WALLED
def test_a_worker_is_alone_with_a_clean_environment(runner: Runner, suite: Suite) -> None:
    seen = seen_by_a_worker(runner, suite)
    assert "RIT_TEST_SECRET" not in seen["environment"]
    assert set(seen["environment"]) <= set(sandbox.environment("1"))
    # Alone in a PID namespace of its own: its init (PID 1, the grader's) and itself.
    assert seen["processes"] == ["1", "2"] and seen["parent"] == 1
    if os.geteuid() == 0:
        assert isinstance(seen["uid"], int) and seen["uid"] >= UID_BASE
    else:
        assert seen["uid"] == os.getuid()
    iso = runner.isolation()
    assert iso.complete and iso.mode == "bwrap", iso


@WALLED
def test_shared_memory_made_by_one_worker_is_gone_for_the_next(
    runner: Runner, suite: Suite
) -> None:
    made = seen_by_a_worker(runner, suite, extra='    seen["shm"] = shared_memory(True)')
    assert made["shm"] == "made"
    again = seen_by_a_worker(runner, suite, extra='    seen["shm"] = shared_memory(False)')
    assert again["shm"] == "absent"


@WALLED
def test_a_worker_has_loopback_and_nothing_of_it_outlives_the_job(
    runner: Runner, suite: Suite
) -> None:
    first = seen_by_a_worker(runner, suite, extra='    seen["lo"] = loopback(47321)')
    assert first["lo"] == "ping OSError", first["lo"]  # TIME_WAIT holds the port in this job
    again = seen_by_a_worker(runner, suite, extra='    seen["lo"] = free(47321)')
    assert again["lo"] == "free", "the last job's TIME_WAIT reached this one"


@WALLED
def test_a_daemon_left_by_a_learner_dies_with_its_worker(runner: Runner, suite: Suite) -> None:
    daemon = """
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            import signal
            signal.pause()  # (time.sleep is cut short in a worker)
        os._exit(0)
    seen["left"] = "a daemon"
"""
    assert seen_by_a_worker(runner, suite, extra=daemon)["left"] == "a daemon"
    for server in runner._servers.values():
        assert leftovers(server) == []
    # The next worker is alone in its namespace again.
    assert seen_by_a_worker(runner, suite)["processes"] == ["1", "2"]


@WALLED
def test_only_the_earlier_builds_seams_reach_a_worker(
    runner: Runner, hidden: Path, tmp_path: Path
) -> None:
    seams = tmp_path / "seams" / "96.py"
    seams.parent.mkdir()
    seams.write_text("REFERENCE = 'build 96 seams'\n")
    files = {"reference": "/reference/96.py", "the file itself": str(seams)}
    with siblings.reference_seams("96", seams):
        later = seen_by_a_worker(runner, load_suite("98", hidden), files=files)
        earlier = seen_by_a_worker(runner, load_suite("90", hidden), files=files)
    # Build 98 may load build 96: the text reaches its worker, never the file.
    assert later["reference"] == "REFERENCE = 'build 96 seams'\n"
    # (Other builds' references registered earlier in this process may come along too.)
    assert later["seams"].get("96") == "/reference/96.py"
    # Build 90 comes before it: nothing of build 96 reaches it, in any form.
    assert earlier["reference"] == "FileNotFoundError" and "96" not in earlier["seams"]
    assert later["the file itself"] == earlier["the file itself"] == "FileNotFoundError"


@WALLED
def test_an_exit_code_is_the_learner_s_own(runner: Runner, suite: Suite) -> None:
    entry = Entry("98", "build", "toy", "toy.ipynb", "", tests=(Spec("look", 1, "h"),))
    # 71 was the grader's own "could not be walled in" code; now no exit code is the grader's.
    in_a_probe = "import os\n\ndef look():\n    os._exit(71)\n"
    result = runner.grade_source("98", in_a_probe, suite=suite, entry=entry)
    assert result.test("look").kind is Outcome.UNFINISHED, result.test("look")
    assert "exited with code 71" in result.test("look").message
    assert not result.grader_fault
    at_load = runner.grade_source("98", "import os\nos._exit(71)\n", suite=suite, entry=entry)
    assert at_load.test("look").kind is Outcome.NOT_LOADED and not at_load.grader_fault
    assert "exited with code 71" in at_load.reason


def test_mapped_bytes_is_this_process_s_address_space_in_whole_pages() -> None:
    mapped = mapped_bytes()
    assert mapped > 10 * 2**20 and mapped % os.sysconf("SC_PAGE_SIZE") == 0


def test_a_wall_that_cannot_rise_says_which_and_why() -> None:
    with pytest.raises(WallError, match=r"^\[Errno \d+\] mount /no/such/place: \w"):
        mount("tmpfs", "/no/such/place", "tmpfs", 0)


RLIMITS = """
import os, resource
from grader.runtime.child.walls import apply_rlimits
from grader.runtime.protocol import Limits

apply_rlimits(Limits(cpu_seconds=3, file_bytes=1000, max_pids=7), nproc=True)
print(resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_NPROC))
print(resource.getrlimit(resource.RLIMIT_CORE))
fd = os.open("{path}", os.O_WRONLY | os.O_CREAT)
os.write(fd, b"x" * 1000)
try:
    os.write(fd, b"x")
except OSError as exc:
    print(exc.errno == 27)  # EFBIG, not a SIGXFSZ death
"""


def test_rlimits_cap_cpu_processes_cores_and_file_size(tmp_path: Path) -> None:
    code = RLIMITS.format(path=tmp_path / "big.txt")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.splitlines() == ["(3, 4) (7, 7)", "(0, 0)", "True"]
