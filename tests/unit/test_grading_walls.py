"""The walls, proven on real bubblewrap: what a worker sees, who it is, what it shares.

Each test grades a toy submission whose one probe, ``look``, reports what the learner's code
can reach (a listing, a file's text, or the name of the error it met), through a judge that
hands the report back as its message. Nothing is mocked: the servers are the ones a class is
graded with, walled in by bubblewrap (the tests are skipped where it cannot be raised, and the
refusal is tested by hiding it).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader import Limits, Runner, Suite, load_suite
from grader.runtime import sandbox
from grader.runtime.child.walls import UID_BASE
from grader.runtime.results import Outcome
from grader.runtime.runner import WallsUnavailable
from tests.unit.test_grading_runner import leftovers
from workbook import siblings
from workbook.shared.manifest import Entry, repo_root
from workbook.shared.manifest import TestSpec as Spec

ROOT = repo_root()
WALLED = pytest.mark.skipif(
    sandbox.walls_problem(sys.executable) is not None, reason="no walls can be raised here"
)

PROBES = """
from grader.suites.observe import Probes, attempt, need

PROBES = Probes()


@PROBES.add("look")
def look(ns):
    return attempt(lambda: need(ns, "look")())
"""

JUDGES = """
from grader.suites.judging import Judges, Fail, ok

JUDGES = Judges()


@JUDGES.add("look")
def _look(obs):
    raise Fail("seen: " + ok(obs("look"), "look()"))
"""

#: The toy submission: each place as a sorted listing, a file's text, or the error it met.
LOOK = """
import json
import os


def _try(fn):
    try:
        return fn()
    except OSError as exc:
        return type(exc).__name__


def _read(path):
    with open(path) as handle:
        return handle.read()


def look():
    seen = {{name: _try(lambda p=path: sorted(os.listdir(p))) for name, path in {places!r}.items()}}
    seen.update({{name: _try(lambda p=path: _read(p)) for name, path in {files!r}.items()}})
    seen["uid"] = os.getuid()
    seen["parent"] = os.getppid()
    seen["environment"] = sorted(os.environ)
    seen["write package"] = _try(lambda: open({package!r}, "w").close() or "wrote")
    seen["write tmp"] = _try(lambda: open("/tmp/mine.txt", "w").close() or "wrote")
    seen["import"] = _try(lambda: __import__("fractions").__name__)
    seen["processes"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
    references = __import__("workbook.siblings").siblings.references()
    seen["seams"] = {{k: str(v) for k, v in references.items()}}
{extra}
    return json.dumps(seen, sort_keys=True)
"""

SHM = """
import ctypes
import socket


def loopback(port):
    # A server on 127.0.0.1 answers a client; the port is then left in TIME_WAIT (the server's
    # side closing first), which lasts a minute in a network namespace shared with the next job.
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        peer, _ = server.accept()
        client.sendall(b"ping")
        said = peer.recv(4).decode()
        peer.close()
        client.recv(1)  # the server's FIN
        client.close()
    return said + " " + free(port)


def free(port):
    with socket.socket() as again:
        try:
            again.bind(("127.0.0.1", port))
        except OSError as exc:
            return type(exc).__name__
    return "free"

def shared_memory(create):
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x52495431
    segment = libc.shmget(key, 4096, (0o1000 | 0o666) if create else 0)
    return "made" if create and segment >= 0 else ("there" if segment >= 0 else "absent")
"""


@pytest.fixture(scope="module")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("builds")
    for build in ("98", "90"):
        (folder / f"build{build}" / "hidden").mkdir(parents=True)
        (folder / f"build{build}" / "hidden" / "probes.py").write_text(PROBES)
        (folder / f"build{build}" / "hidden" / "test_judges.py").write_text(JUDGES)
    return folder


@pytest.fixture(scope="module")
def suite(hidden: Path) -> Suite:
    return load_suite("98", hidden)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("outputs")
    (folder / "grades.csv").write_text("learner,total\n")
    return folder


@pytest.fixture(scope="module")
def runner(outputs: Path) -> Iterator[Runner]:
    if sandbox.walls_problem(sys.executable) is not None:
        pytest.skip("no walls can be raised here")
    # Set before the servers start: none of the grader's environment may reach a worker.
    os.environ["RIT_TEST_SECRET"] = "the grading process's own"
    try:
        with Runner(Limits(load_seconds=3.0), hide=(outputs,), walls="bwrap") as runner:
            yield runner.start()
    finally:
        del os.environ["RIT_TEST_SECRET"]


def seen_by_a_worker(
    runner: Runner,
    suite: Suite,
    places: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    extra: str = "",
) -> dict[str, Any]:
    entry = Entry(suite.build, "build", "toy", "toy.ipynb", "", tests=(Spec("look", 1, "h"),))
    package = str(ROOT / "etl" / "planted-by-a-walls-test.txt")
    source = LOOK.format(places=places or {}, files=files or {}, package=package, extra=extra)
    result = runner.grade_source(suite.build, SHM + source, suite=suite, entry=entry)
    if Path(package).exists():
        Path(package).unlink()
        pytest.fail("the worker wrote into the repository")
    message = result.test("look").message
    assert message.startswith("seen: "), message
    seen: dict[str, Any] = json.loads(message.removeprefix("seen: "))
    return seen


@WALLED
def test_a_worker_sees_the_allowlist_and_nothing_else(
    runner: Runner, suite: Suite, outputs: Path, tmp_path: Path
) -> None:
    clone = tmp_path / "another-clone"
    (clone / "solutions").mkdir(parents=True)
    (clone / "solutions" / "03.ipynb").write_text("the answers")
    learners = tmp_path / "class" / "ada"
    learners.mkdir(parents=True)
    host_tmp = Path("/tmp") / f"rit-walls-test-{uuid.uuid4().hex}.txt"
    host_tmp.write_text("the host's /tmp")
    try:
        seen = seen_by_a_worker(
            runner,
            suite,
            places={
                "repository": str(ROOT),
                "grader": str(ROOT / "grader"),
                "grader runtime": str(ROOT / "grader" / "runtime"),
                "grader suites": str(ROOT / "grader" / "suites"),
                "builds": str(ROOT / "builds"),
                "build 03": str(ROOT / "builds" / "build03"),
                "hidden": str(ROOT / "builds" / "build03" / "hidden"),
                "solutions": str(ROOT / "solutions"),
                "git": str(ROOT / ".git"),
                "outputs": str(outputs),
                "beside the repo": str(ROOT.parent),
                "another clone": str(clone / "solutions"),
                "class": str(learners.parent),
                "suite": str(suite.folder),
                "run lock": "/run/lock",
                "tmp": "/tmp",
                "root": "/",
            },
            files={
                "host tmp": str(host_tmp),
                "seams file": str(ROOT / "builds/build03/hidden/seams.py"),
            },
        )
    finally:
        host_tmp.unlink()
    # The repository shows only what the child runs on: the packages, the child runtime, the venv.
    assert set(seen["repository"]) <= {".venv", "etl", "workbook", "grader", "builds"}, seen
    assert {"etl", "workbook", "grader", "builds"} <= set(seen["repository"])
    assert set(seen["grader"]) == {"__init__.py", "runtime", "suites"}
    assert set(seen["grader runtime"]) == {"__init__.py", "child", "protocol.py"}
    assert set(seen["grader suites"]) == {"__init__.py", "observe.py"}
    # Of the build folders, the visible half only: no hidden/, no pytest plugin, no README.
    assert set(seen["builds"]) == {"__init__.py", "build03", "build05", "build07", "build08"}
    assert set(seen["build 03"]) == {"__init__.py", "build.toml", "visible"}
    for secret in ("hidden", "solutions", "git", "outputs", "another clone", "class", "suite"):
        assert seen[secret] == "FileNotFoundError", (secret, seen[secret])
    assert seen["run lock"] == "FileNotFoundError"
    assert seen["host tmp"] == "FileNotFoundError" and seen["seams file"] == "FileNotFoundError"
    assert seen["beside the repo"] == [ROOT.name]
    assert "run" not in seen["root"] and "home" not in seen["root"]
    # A private /tmp: empty but for the way down to a bound folder that lives there.
    bound_in_tmp = {p.split("/")[2] for p in _bound() if p.startswith("/tmp/")}
    assert set(seen["tmp"]) <= bound_in_tmp, seen["tmp"]
    assert seen["write tmp"] == "wrote"
    assert seen["write package"] in ("OSError", "PermissionError")  # read-only
    assert seen["import"] == "fractions"  # the interpreter is all there
    assert (outputs / "grades.csv").read_text() == "learner,total\n"


def _bound() -> list[str]:
    command = sandbox.server_command(sys.executable, "1", [])
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--ro-bind"]


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


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """bubblewrap hidden from this process (PATH without it), the verdict forgotten."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    sandbox.walls_problem.cache_clear()
    yield
    sandbox.walls_problem.cache_clear()


def test_without_bubblewrap_a_runner_refuses_and_says_how_to_get_it(no_bwrap: None) -> None:
    problem = sandbox.walls_problem(sys.executable)
    assert problem == "bubblewrap (bwrap) is not installed or not on PATH"
    with pytest.raises(WallsUnavailable) as refused:
        Runner(walls="bwrap")
    paragraph = str(refused.value)
    for needed in ("apt-get install bubblewrap", "dnf install bubblewrap", "pacman -S bubblewrap"):
        assert needed in paragraph
    assert "WALLS=off" in paragraph and "--walls off" in paragraph and "\n" not in paragraph
    assert sandbox.default_walls(sys.executable) == "off"  # the instructor's own checks
    assert sandbox.walls_identity("bwrap") == "bwrap"


def test_the_child_runtime_imports_nothing_else_of_the_grader() -> None:
    # What the walls bind of grader/ is all the fork server and its workers import.
    code = "import sys, grader.runtime.child.forkserver; print(sorted(m for m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-s", "-P", "-c", code], capture_output=True, text=True, check=True
    )
    modules = ast.literal_eval(done.stdout)
    imported = {m for m in modules if m == "grader" or m.startswith("grader.")}
    # grader/runtime/child -> grader.runtime.child; grader/suites/__init__.py -> grader.suites
    bound = {
        "grader." + part.removesuffix(".py").removesuffix("__init__").strip("/").replace("/", ".")
        for part in sandbox.CHILD_RUNTIME
    }
    outside = {m for m in imported if not any(m == b or m.startswith(b + ".") for b in bound)}
    assert outside <= {"grader"}, outside
    assert "Runner" in dir(__import__("grader"))  # while `from grader import Runner` still works
