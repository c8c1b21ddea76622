"""`grader.runtime.sandbox`: the bubblewrap command a fork server runs in, what a worker
sees through it (proven on real bubblewrap, with the walled runner of
``tests/unit/grader/runtime/conftest.py``), the environment it gets, and the refusal and the
words said when there are no walls."""

from __future__ import annotations

import ast
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import Limits, Runner, Suite
from grader.runtime import sandbox
from grader.runtime.runner import WallsUnavailable
from tests.conftest import ROOT
from tests.unit.grader.runtime.conftest import WALLED
from tests.unit.grader.runtime.conftest import look_around as seen_by_a_worker


@pytest.fixture
def runner(walled_runner: Runner) -> Runner:
    return walled_runner


@pytest.fixture
def suite(walled_suite: Suite) -> Suite:
    return walled_suite


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


def test_the_environment_is_fixed_and_carries_only_the_hash_seed() -> None:
    env = sandbox.environment("2")
    assert env["PYTHONHASHSEED"] == "2" and env["HOME"] == env["TMPDIR"] == "/tmp"
    assert env == {**sandbox.environment("1"), "PYTHONHASHSEED": "2"}
    assert not any(key in env for key in ("VIRTUAL_ENV", "PYTHONPATH", "USER"))


@pytest.mark.skipif(sandbox.bwrap() is None, reason="bubblewrap is not installed")
def test_the_server_command_binds_the_system_read_only_and_runs_the_server() -> None:
    command = sandbox.server_command(sys.executable, "1", ["5", "bwrap", "0"])
    assert command[0].endswith("bwrap")
    bound = _bound()
    assert "/usr" in bound and str(ROOT / "etl") in bound
    assert str(ROOT / "builds" / "build03" / "hidden") not in bound
    assert not any(p.startswith(str(ROOT / "solutions")) for p in bound)
    assert {"--die-with-parent", "--clearenv", "--new-session"} <= set(command)
    assert command[-5:-1] == ["grader.runtime.child.forkserver", "5", "bwrap", "0"]


def test_walls_identity_names_bubblewrap_s_version_only_for_walled_grades() -> None:
    assert sandbox.walls_identity("off") == "off"
    assert sandbox.walls_identity("container") == "container"
    if sandbox.bwrap() is not None:
        assert sandbox.walls_identity("bwrap").startswith("bwrap ")


def test_isolation_without_walls_says_what_is_missing() -> None:
    off = sandbox.isolation("off", privileged=True, cgroup=False, limits=Limits(max_pids=9))
    assert not off.complete and off.mode == "off"
    assert off.pids_text.startswith("NO process-count limit (WALLS=off)")
    assert off.user_text == "runs as root, the grader's own user (WALLS=off)"
    assert off.summary.startswith("walls: OFF")
    container = sandbox.isolation("container", privileged=False, cgroup=True, limits=Limits())
    assert container.pids and not container.network
    assert "WALLS=container" in container.network_text


def test_isolation_with_walls_is_complete_and_names_the_limits() -> None:
    walled = sandbox.isolation("bwrap", privileged=False, cgroup=True, limits=Limits(max_pids=9))
    assert walled.complete
    assert walled.pids_text.startswith("pids cgroup and RLIMIT_NPROC (9 per worker")
    assert walled.as_json()["network_text"] == "no network (an empty network namespace)"


def test_the_refusal_is_one_paragraph_that_names_the_problem() -> None:
    text = sandbox.refusal("no user namespaces")
    assert text.startswith("Not grading: no walls can be raised around the learners' code here:")
    assert "no user namespaces." in text and "\n" not in text


def test_without_bubblewrap_there_is_no_server_command(no_bwrap: None) -> None:
    with pytest.raises(FileNotFoundError, match=r"bubblewrap \(bwrap\) is not installed"):
        sandbox.server_command(sys.executable, "1", [])
