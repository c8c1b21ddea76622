"""The runner on small synthetic submissions: every way a submission can break costs only what
it broke, with a reason, and nothing raises out of the runner.

The suite here is a toy: three probes calling the submission's ``a()``, ``b()`` and ``c()``
(judged to return 1, 2 and 3) and one probe run in both interpreters. One runner with short
limits serves the whole module, so the walls are proven on the servers a batch would reuse
(walled in by bubblewrap where it can be, as a class is graded).
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import Limits, Runner, SubmissionResult, Suite, load_suite
from grader.runtime.forkclient import ForkServer
from grader.runtime.results import Outcome
from workbook.shared.manifest import Entry
from workbook.shared.manifest import TestSpec as Spec

PROBES = """
import os
from grader.suites.observe import Probes, attempt, need

PROBES = Probes()

for _name in ("a", "b", "c"):
    PROBES.add(_name)(lambda ns, name=_name: attempt(lambda: need(ns, name)()))


@PROBES.add("seed", interpreters=2)
def seed(ns):
    return {"hash": hash("run-it-twice"), "key": attempt(lambda: need(ns, "key")())}
"""

JUDGES = """
from grader.suites.judging import Fail, Judges, check, equal, ok

JUDGES = Judges()

for _name, _value in (("a", 1), ("b", 2), ("c", 3)):

    def _judge(obs, name=_name, value=_value):
        equal(f"{name}()", ok(obs(name), f"{name}()"), value)

    JUDGES.add(_name)(_judge)


@JUDGES.add("seed")
def _seed(obs):
    here, there = obs("seed"), obs("seed", interpreter=2)
    check(here["hash"] != there["hash"], "hash", "equal", "different hash seeds")
    equal("key() in a second interpreter", there["key"], here["key"])
    ok(here["key"], "key()")
"""

GOOD = """
def a():
    return 1

def b():
    return 2

def c():
    return 3

def key():
    return "k"
"""

LIMITS = Limits(probe_seconds=0.4, grace_seconds=0.4, load_seconds=1.0, budget_seconds=8.0)
ENTRY = Entry(
    number="99",
    kind="build",
    title="toy",
    path="toy.ipynb",
    outcome="",
    tests=tuple(Spec(n, 1, f"hint {n}") for n in ("a", "b", "c", "seed")),
)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    hidden = tmp_path_factory.mktemp("builds")
    folder = hidden / "build99" / "hidden"
    folder.mkdir(parents=True)
    (folder / "probes.py").write_text(PROBES)
    (folder / "test_judges.py").write_text(JUDGES)
    return load_suite("99", hidden)


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with Runner(LIMITS) as runner:
        yield runner.start()


def grade(runner: Runner, suite: Suite, source: str) -> SubmissionResult:
    return runner.grade_source("99", textwrap.dedent(source), suite=suite, entry=ENTRY)


def scores(result: SubmissionResult) -> dict[str, int]:
    return {t.name: t.points for t in result.tests}


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` on this machine (read from /proc, host pids)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path("/proc", name, "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def leftovers(server: ForkServer) -> list[int]:
    """The processes of a server besides its own (bwrap's init and the server, walled in;
    none without walls) once no job is running: what a learner left behind."""
    assert server.proc is not None
    own = 2 if server.walls == "bwrap" else 0
    return descendants(server.proc.pid)[own:]


def with_b(body: str) -> str:
    """The good submission with `b` replaced by `body` (a full ``def b(): ...``)."""
    good = textwrap.dedent(GOOD)
    return good.replace("def b():\n    return 2\n", textwrap.dedent(body))


def test_a_correct_submission_earns_every_point(runner: Runner, suite: Suite) -> None:
    result = grade(runner, suite, GOOD)
    assert scores(result) == {"a": 1, "b": 1, "c": 1, "seed": 1}
    assert (result.status, result.reason) == ("graded", "")
    assert {t.kind for t in result.tests} == {Outcome.PASSED}


def test_grading_twice_gives_the_same_result(runner: Runner, suite: Suite) -> None:
    source = with_b("def b():\n    return 2.0\n")
    first, second = grade(runner, suite, source), grade(runner, suite, source)
    assert [(t.name, t.points, t.message) for t in first.tests] == [
        (t.name, t.points, t.message) for t in second.tests
    ]


def test_a_wrong_type_is_not_a_right_value(runner: Runner, suite: Suite) -> None:
    result = grade(runner, suite, with_b("def b():\n    return 2.0\n"))
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert "got:      2.0" in result.test("b").message
    assert result.test("b").kind is Outcome.WRONG


def test_an_object_that_equals_everything_earns_nothing(runner: Runner, suite: Suite) -> None:
    source = with_b(
        """
        class Liar(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__

        def b():
            return Liar(5)
        """
    )
    result = grade(runner, suite, source)
    assert scores(result)["b"] == 0
    assert "a Liar object" in result.test("b").message


def test_a_hang_costs_only_its_own_points(runner: Runner, suite: Suite) -> None:
    start = time.perf_counter()
    result = grade(runner, suite, with_b("def b():\n    while True:\n        pass\n"))
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert result.test("b").message.startswith("timed out")
    assert result.test("b").kind is Outcome.UNFINISHED
    assert result.status == "partial"
    assert time.perf_counter() - start < 3.0


def test_a_hang_that_swallows_the_alarm_is_killed(runner: Runner, suite: Suite) -> None:
    source = with_b(
        """
        def b():
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass
        """
    )
    result = grade(runner, suite, source)
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert "timed out" in result.test("b").message


def test_os_exit_crashes_only_its_probe(runner: Runner, suite: Suite) -> None:
    result = grade(runner, suite, with_b("import os\n\ndef b():\n    os._exit(3)\n"))
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert "exited with code 3" in result.test("b").message
    assert result.test("b").kind is Outcome.UNFINISHED


def test_a_segfault_crashes_only_its_probe(runner: Runner, suite: Suite) -> None:
    source = with_b("import ctypes\n\ndef b():\n    return ctypes.string_at(0)\n")
    result = grade(runner, suite, source)
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert "segmentation fault" in result.test("b").message


def test_sys_exit_in_a_function_is_an_observation(runner: Runner, suite: Suite) -> None:
    result = grade(runner, suite, with_b("import sys\n\ndef b():\n    sys.exit(0)\n"))
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert "raised SystemExit" in result.test("b").message


def test_sys_exit_at_load_zeroes_everything_with_a_reason(runner: Runner, suite: Suite) -> None:
    result = grade(runner, suite, "import sys\nsys.exit(1)\n" + GOOD)
    assert sum(scores(result).values()) == 0
    assert result.status == "error"
    assert "SystemExit" in result.reason
    assert {t.kind for t in result.tests} == {Outcome.NOT_LOADED}


def test_an_endless_loop_at_load_zeroes_everything(runner: Runner, suite: Suite) -> None:
    result = grade(runner, suite, "while True:\n    pass\n" + GOOD)
    assert sum(scores(result).values()) == 0
    assert "did not finish running" in result.reason


def test_stderr_noise_loses_nothing(runner: Runner, suite: Suite) -> None:
    source = with_b(
        """
        import sys
        import warnings

        def b():
            print("debug: computing b", file=sys.stderr)
            warnings.warn("b is deprecated")
            print("b says hello")
            return 2
        """
    )
    result = grade(runner, suite, source)
    assert scores(result) == {"a": 1, "b": 1, "c": 1, "seed": 1}
    assert "debug: computing b" in result.output
    assert "b says hello" in result.output


def test_huge_output_is_capped_and_costs_nothing(runner: Runner, suite: Suite) -> None:
    source = with_b(
        """
        import os

        def b():
            for _ in range(200):
                print("x" * 50_000)
            os.write(2, b"y" * 100_000)
            return 2
        """
    )
    result = grade(runner, suite, source)
    assert scores(result) == {"a": 1, "b": 1, "c": 1, "seed": 1}
    assert len(result.output.encode()) <= LIMITS.output_bytes + 100
    assert "[output cut here by the grader" in result.output


def test_a_memory_blow_up_costs_only_its_probe(runner: Runner, suite: Suite) -> None:
    source = with_b(
        "def b():\n    hoard = []\n    while True:\n        hoard.append(bytes(2**26))\n"
    )
    result = grade(runner, suite, source)
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert "MemoryError" in result.test("b").message


def test_a_fork_bomb_is_contained(runner: Runner, suite: Suite) -> None:
    source = with_b(
        """
        import os, time

        def b():
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.001)
        """
    )
    result = grade(runner, suite, source)
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    for server in runner._servers.values():  # only the server is left once grading returns
        assert leftovers(server) == []


def test_the_process_limit_holds(runner: Runner, suite: Suite) -> None:
    # Root or not, cgroup or not: RLIMIT_NPROC of a uid or user namespace of the worker's own.
    source = with_b(
        """
        import os, time

        def b():
            children = 0
            try:
                while children < 200:
                    if os.fork() == 0:
                        time.sleep(30)
                        os._exit(0)
                    children += 1
            except OSError:
                pass
            return children
        """
    )
    result = grade(runner, suite, source)
    assert "got:      " in result.test("b").message
    forked = int(result.test("b").message.split("got:      ")[1].split()[0])
    assert forked < LIMITS.max_pids


def test_no_network(runner: Runner, suite: Suite) -> None:
    source = with_b(
        """
        import socket

        def b():
            with socket.socket() as s:
                s.settimeout(1)
                s.connect(("127.0.0.1", 9))
        """
    )
    result = grade(runner, suite, source)
    message = result.test("b").message.lower()
    assert "unreachable" in message or "connection refused" in message, message
    isolation = runner.isolation()
    assert isolation.network and isolation.network_text.startswith("no network")


FORGE = """
import json, os

def forge(*names):
    # A report for each probe named, written to every descriptor the process has open.
    for name in names:
        line = json.dumps({"event": "done", "probe": name, "obs": {"ok": 2}}) + "\\n"
        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                os.write(fd, line.encode())
            except OSError:
                pass
"""


def test_forged_reports_void_the_worker_that_wrote_them(runner: Runner, suite: Suite) -> None:
    source = FORGE + with_b("def b():\n    forge('b', 'c', 'seed')\n    return 5\n")
    result = grade(runner, suite, source)
    # a shared the tampered worker, so it is void too; c and seed ran in a fresh worker.
    assert scores(result) == {"a": 0, "b": 0, "c": 1, "seed": 1}
    assert result.test("b").message.startswith("not graded: something other than the probe")
    assert result.test("b").kind is Outcome.VOID


def test_a_forged_report_then_exit_is_not_confirmed(runner: Runner, suite: Suite) -> None:
    source = FORGE + with_b("def b():\n    forge('b')\n    os._exit(0)\n")
    result = grade(runner, suite, source)
    assert scores(result) == {"a": 1, "b": 0, "c": 1, "seed": 1}
    assert "unconfirmed" in result.test("b").message


def test_the_two_interpreters_have_different_hash_seeds(runner: Runner, suite: Suite) -> None:
    source = GOOD.replace('return "k"', 'return str(hash("k"))')
    result = grade(runner, suite, source)
    assert scores(result)["seed"] == 0
    assert "key() in a second interpreter" in result.test("seed").message


def test_files_stay_in_a_scratch_folder_and_come_back_as_artefacts(
    runner: Runner, suite: Suite
) -> None:
    source = with_b(
        """
        import os

        def b():
            with open("notes.txt", "w") as out:
                out.write("hi")
            os.symlink("/etc/passwd", "link.txt")
            os.mkfifo("pipe")
            return os.getcwd()
        """
    )
    run = runner.run_probes(textwrap.dedent(source), suite)
    try:
        assert run.records["b"].obs == {"ok": "/scratch/work"}
        assert run.artefacts is not None
        assert (run.artefacts / "notes.txt").read_text() == "hi"
        # Regular files only: a link or a FIFO the learner left is not copied out.
        assert sorted(p.name for p in run.artefacts.iterdir()) == ["@2", "notes.txt"]
        assert [p.name for p in (run.artefacts / "@2").iterdir()] == []
        assert not Path("notes.txt").exists()
        scratch = run.artefacts.parent
    finally:
        runner.discard(run)
    assert run.artefacts is None and not scratch.exists()


def test_a_notebook_that_is_not_json_scores_zero_with_a_reason(
    runner: Runner, suite: Suite, tmp_path: Path
) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text("{not json")
    result = runner.grade_notebook("99", path, suite=suite, entry=ENTRY)
    assert sum(scores(result).values()) == 0
    assert result.status == "error"
    assert "not a notebook (invalid JSON" in result.reason
    assert all(t.message == result.reason for t in result.tests)
    assert {t.kind for t in result.tests} == {Outcome.NOT_LOADED}


def test_a_notebook_without_answer_cells_scores_zero(
    runner: Runner, suite: Suite, make_notebook: object
) -> None:
    path = make_notebook(("setup", "x = 1"), ("", "y = 2"))  # type: ignore[operator]
    result = runner.grade_notebook("99", path, suite=suite, entry=ENTRY)
    assert result.status == "error"
    assert "no cell tagged 'answer'" in result.reason


def test_a_syntax_error_names_the_cell(runner: Runner, suite: Suite, make_notebook: object) -> None:
    path = make_notebook(("answer", GOOD), ("answer", "def broken(:\n    pass"))  # type: ignore[operator]
    result = runner.grade_notebook("99", path, suite=suite, entry=ENTRY)
    assert result.status == "error"
    assert "cell 2 (answer" in result.reason


def test_an_error_at_load_names_the_cell(
    runner: Runner, suite: Suite, make_notebook: object
) -> None:
    path = make_notebook(  # type: ignore[operator]
        ("setup", "import math"), ("answer", GOOD), ("answer", "undefined_name + 1")
    )
    result = runner.grade_notebook("99", path, suite=suite, entry=ENTRY)
    assert result.status == "error"
    assert "NameError" in result.reason
    assert "cell 3 (answer)" in result.reason


def test_a_good_notebook_is_graded_through_the_export_path(
    runner: Runner, suite: Suite, make_notebook: object
) -> None:
    path = make_notebook(("md", "# toy"), ("answer", GOOD), ("", "print(a())"))  # type: ignore[operator]
    result = runner.grade_notebook("99", path, suite=suite, entry=ENTRY)
    assert scores(result) == {"a": 1, "b": 1, "c": 1, "seed": 1}


def test_a_dead_server_is_replaced(runner: Runner, suite: Suite) -> None:
    # Where the worker keeps root (no uid of its own), its code can kill the server that
    # forked it; here the grader kills it between two submissions, which is the same.
    import signal

    for server in list(runner._servers.values()):
        assert server.proc is not None
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
    source = with_b("import os, signal\n\ndef b():\n    os.kill(os.getppid(), signal.SIGKILL)\n")
    result = grade(runner, suite, source)
    assert scores(result)["a"] == 1 and scores(result)["b"] == 0
    assert scores(grade(runner, suite, GOOD)) == {"a": 1, "b": 1, "c": 1, "seed": 1}


def test_no_process_is_left_behind(runner: Runner, suite: Suite) -> None:
    source = with_b(
        """
        import os, time

        def b():
            if os.fork() == 0:
                os.setsid()  # even a child that leaves the session
                time.sleep(60)
            return 2
        """
    )
    grade(runner, suite, source)
    servers = list(runner._servers.values())
    for server in servers:
        assert leftovers(server) == []
    assert all(server.alive() for server in servers)
    assert os.getpid()  # and this process is, of course, still here


def test_only_a_warmed_server_starts_its_workers_with_hypothesis(suite: Suite) -> None:
    # a() scores only while Hypothesis is not imported: a batch with no learner tests to run
    # (all from the cache) never pays for it, and `warm` brings it in for those to come.
    source = with_b("def b():\n    return 2\n").replace(
        "def a():\n    return 1",
        "def a():\n    import sys\n    return 0 if 'hypothesis' in sys.modules else 1",
    )
    with Runner(LIMITS, learner_tests=False) as cold:
        cold.start()
        assert scores(grade(cold, suite, source))["a"] == 1
        cold.warm()
        assert scores(grade(cold, suite, source))["a"] == 0
