"""The walls against root: what a worker sees of the filesystem, and who it is.

The plan (`plan_masks`) is checked on folders made here; the walls themselves by grading a toy
submission that reports what it can reach. Where the grader is not root, the report says so
in words instead.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import Limits, Runner, Suite, load_suite, sandbox
from grader.sandbox import UID_BASE, Mask, needed_paths, plan_masks
from workbook.manifest import Entry, repo_root
from workbook.manifest import TestSpec as Spec

ROOT = repo_root()
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="the walls against root need root")

PROBES = """
from grader.observe import Probes, attempt, need

PROBES = Probes()


@PROBES.add("look")
def look(ns):
    return attempt(lambda: need(ns, "look")())
"""

JUDGES = """
from grader.judging import Judges, Fail, ok

JUDGES = Judges()


@JUDGES.add("look")
def _look(obs):
    raise Fail("seen: " + ok(obs("look"), "look()"))
"""

#: What the toy submission reports: each place as a listing or the error it met.
LOOK = """
import json
import os


def _try(fn):
    try:
        return fn()
    except OSError as exc:
        return type(exc).__name__


def look():
    places = {places!r}
    seen = {{name: _try(lambda p=path: sorted(os.listdir(p))) for name, path in places.items()}}
    seen["uid"] = os.getuid()
    seen["write repo"] = _try(lambda: open({planted!r}, "w").close() or "wrote")
    seen["write tmp"] = _try(lambda: open("/tmp/mine.txt", "w").close() or "wrote")
    seen["import"] = _try(lambda: __import__("fractions").__name__)
    seen["signal server"] = _try(lambda: os.kill(os.getppid(), 0) or "allowed")
    return json.dumps(seen, sort_keys=True)
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    hidden = tmp_path_factory.mktemp("hidden")
    (hidden / "build98").mkdir()
    (hidden / "build98" / "probes.py").write_text(PROBES)
    (hidden / "build98" / "judges.py").write_text(JUDGES)
    return load_suite("98", hidden)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("outputs")
    (folder / "grades.csv").write_text("learner,total\n")
    return folder


@pytest.fixture(scope="module")
def runner(outputs: Path) -> Iterator[Runner]:
    with Runner(Limits(load_seconds=3.0), hide=(outputs,)) as runner:
        yield runner.start()


def seen_by_a_worker(runner: Runner, suite: Suite, places: dict[str, str]) -> dict[str, object]:
    planted = ROOT / "planted-by-a-walls-test.txt"
    entry = Entry("98", "build", "toy", "toy.ipynb", "", tests=(Spec("look", 1, "h"),))
    source = LOOK.format(places=places, planted=str(planted))
    result = runner.grade_source("98", source, suite=suite, entry=entry)
    if planted.exists():
        planted.unlink()
        pytest.fail("the worker wrote into the repository")
    message = result.test("look").message
    assert message.startswith("seen: "), message
    seen: dict[str, object] = json.loads(message.removeprefix("seen: "))
    return seen


@AS_ROOT
def test_a_worker_sees_no_secret_and_is_not_root(
    runner: Runner, suite: Suite, outputs: Path, tmp_path: Path
) -> None:
    (tmp_path / "the-graders-scratch.txt").write_text("x")
    seen = seen_by_a_worker(
        runner,
        suite,
        {
            "hidden": str(ROOT / "tests" / "hidden"),
            "solutions": str(ROOT / "solutions"),
            "git": str(ROOT / ".git"),
            "outputs": str(outputs),
            "beside the repo": str(ROOT.parent),
            "suite": str(suite.folder),
            "grader tmp": str(tmp_path),
            "tmp": "/tmp",
        },
    )
    assert seen["hidden"] == [] and seen["solutions"] == [] and seen["git"] == [], seen
    # Under /tmp, which every worker gets empty: not even there to be covered.
    assert seen["outputs"] in ([], "FileNotFoundError"), seen
    assert seen["suite"] in ([], "FileNotFoundError"), seen
    assert seen["beside the repo"] == [ROOT.name]
    assert seen["grader tmp"] == "FileNotFoundError"
    # A private /tmp: empty, but for the way down to the repository when it lives there.
    inside_tmp = ROOT.is_relative_to("/tmp")
    assert seen["tmp"] == ([ROOT.relative_to("/tmp").parts[0]] if inside_tmp else []), seen
    assert seen["write tmp"] == "wrote"
    assert isinstance(seen["uid"], int) and seen["uid"] >= UID_BASE
    assert seen["write repo"] == "PermissionError"
    assert seen["signal server"] == "PermissionError"
    assert seen["import"] == "fractions"  # the interpreter stays reachable behind the masks
    iso = runner.isolation()
    assert iso.complete, iso
    assert (outputs / "grades.csv").read_text() == "learner,total\n"


def test_the_plan_covers_secrets_and_what_is_beside_the_repo(tmp_path: Path) -> None:
    repo, venv, secret = (
        tmp_path / "repo",
        tmp_path / "repo" / ".venv",
        tmp_path / "repo" / "solutions",
    )
    for folder in (venv, secret, tmp_path / "other"):
        folder.mkdir(parents=True)
    masks = plan_masks([str(secret)], str(tmp_path), [str(venv), str(repo)], uid=None)
    kinds = {m.path: m.kind for m in masks}
    assert kinds[str(secret)] == "secret"
    assert kinds[str(tmp_path)] == "cover"
    assert [m.path for m in masks] == sorted(kinds, key=lambda p: (p.count("/"), p))
    assert all(kinds.get(p) == "temp" for p in ("/tmp", "/dev/shm") if os.path.isdir(p))


def test_a_folder_the_uid_cannot_search_is_covered_and_what_is_needed_comes_back(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    interpreter = home / "pyenv" / "bin"
    interpreter.mkdir(parents=True)
    home.chmod(0o700)
    (tmp_path).chmod(0o755)
    masks = plan_masks([], None, [str(interpreter)], uid=UID_BASE + 1)
    # The shallowest folder on the way that the uid may not search (pytest's own folder
    # under /tmp may already be one; else `home`).
    blocked = next(
        str(p)
        for p in reversed(interpreter.parents)
        if p != Path("/") and not p.stat().st_mode & 0o001
    )
    assert Mask(blocked, "cover") in masks
    # A needed path is never itself covered.
    assert not plan_masks([], str(interpreter), [str(interpreter)], uid=None)[-1].path.endswith(
        "bin"
    )


def test_the_needed_paths_hold_the_interpreter_and_the_packages() -> None:
    needed = needed_paths()
    assert os.path.realpath(sys.base_prefix) in needed
    assert os.path.realpath(sys.prefix) in needed
    assert str(ROOT) in needed  # etl and workbook live here (an editable install)


def test_without_root_the_report_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    walls = sandbox.probe_walls("/nonexistent")
    assert not walls.filesystem and not walls.user
    assert walls.filesystem_text.startswith("secrets NOT hidden: the grader is not root")
    assert "switching users needs root" in walls.user_text
