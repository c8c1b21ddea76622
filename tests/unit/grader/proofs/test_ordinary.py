"""The ordinary-user part's set-up, without grading as nobody: the class it writes (a solution, the
stubs, a cheat that really takes the answers when nothing walls it in), the venv nobody grades
from (slow), the skip when nobody cannot be acted as, and the verdict it gives on a grading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.proofs import ordinary
from grader.proofs.nobody import interpreter, skip_reason
from tests.conftest import ROOT
from workbook.shared.errors import WorkbookError
from workbook.shared.export import load
from workbook.shared.manifest import load_manifest

ENTRY = load_manifest().entry("03")
NAME = Path(ENTRY.path).name
FULL = str(ENTRY.max_points)


def test_the_class_is_a_solution_the_stubs_and_a_cheat(tmp_path: Path) -> None:
    learners = ordinary.make_class(tmp_path, ROOT)
    assert learners == tmp_path / "class"
    assert sorted(str(p.relative_to(learners)) for p in learners.rglob("*")) == [
        "cheat",
        f"cheat/{NAME}",
        "solution",
        f"solution/{NAME}",
        "stub",
        f"stub/{NAME}",
    ]
    assert (learners / "solution" / NAME).read_bytes() == (ROOT / str(ENTRY.solution)).read_bytes()
    assert (learners / "stub" / NAME).read_bytes() == (ROOT / ENTRY.path).read_bytes()


def test_the_cheat_is_the_stubs_plus_one_answer_cell_reading_the_repository(
    tmp_path: Path,
) -> None:
    staged = tmp_path / "staged"  # the copy of the repository nobody grades from
    for name in (ENTRY.path, str(ENTRY.solution)):
        (staged / name).parent.mkdir(parents=True, exist_ok=True)
        (staged / name).write_bytes((ROOT / name).read_bytes())
    learners = ordinary.make_class(tmp_path, staged)
    stub = json.loads((ROOT / ENTRY.path).read_text(encoding="utf-8"))
    cheat = json.loads((learners / "cheat" / NAME).read_text(encoding="utf-8"))
    assert cheat["cells"][:-1] == stub["cells"]
    extra = cheat["cells"][-1]
    assert extra["metadata"]["tags"] == ["answer"]
    assert repr(str(staged / str(ENTRY.solution))) in extra["source"]
    assert repr(str(staged / "builds/build03/hidden/seams.py")) in extra["source"]


def test_without_walls_the_cheat_takes_the_answers_and_the_stub_has_none(
    tmp_path: Path,
) -> None:
    learners = ordinary.make_class(tmp_path, ROOT)
    assert load(learners / "cheat" / NAME).fnv1a_64(b"") == "cbf29ce484222325"
    with pytest.raises((NotImplementedError, WorkbookError)):
        load(learners / "stub" / NAME).fnv1a_64(b"")


def test_the_part_is_skipped_with_the_reason_when_nobody_cannot_be_acted_as(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ordinary, "skip_reason", lambda: "not root")
    monkeypatch.setattr(ordinary, "stage", lambda *a, **k: pytest.fail("staged anyway"))
    assert ordinary.main() == 0
    assert capsys.readouterr().out == "skipped: not root\n"


# ── the verdict on a grading as nobody ──────────────────────────────────────────────────


def graded(out: Path, rows: dict[str, tuple[str, str]], code: int = 0) -> int:
    """`_verdict` on a grading that exited `code` and wrote ``learner: (points, walls)``."""
    out.mkdir(exist_ok=True)
    lines = ["learner,03,total,max,status,reason,walls"]
    lines += [f"{n},{p},{p},{FULL},graded,,{w}" for n, (p, w) in rows.items()]
    (out / "grades.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = subprocess.CompletedProcess(["grade"], code, "the batch said\n", "")
    return ordinary._verdict(done, out, 1.0)


def test_the_walls_hold_when_only_the_solution_scores_behind_bwrap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {"solution": (FULL, "bwrap"), "stub": ("0", "bwrap"), "cheat": ("0", "bwrap")}
    assert graded(tmp_path, rows) == 0
    said = capsys.readouterr().out
    assert f"cheat     build 03: 0/{FULL} (expected 0)" in said
    assert "walls: bwrap; graded as uid 65534 in 1.0 s" in said


@pytest.mark.parametrize(
    "rows",
    [
        {"solution": (FULL, "bwrap"), "stub": ("0", "bwrap"), "cheat": (FULL, "bwrap")},
        {"solution": (FULL, "off"), "stub": ("0", "off"), "cheat": ("0", "off")},
        {"solution": ("0", "bwrap"), "stub": ("0", "bwrap"), "cheat": ("0", "bwrap")},
        {"solution": (FULL, "bwrap"), "stub": ("0", "bwrap")},
    ],
    ids=["the cheat scored", "no walls", "the solution failed", "a learner missing"],
)
def test_the_part_fails_when_the_grades_or_walls_are_not_as_expected(
    tmp_path: Path, rows: dict[str, tuple[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert graded(tmp_path, rows) == 1
    assert "the batch said" in capsys.readouterr().out


def test_the_part_fails_when_the_grading_itself_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = subprocess.CompletedProcess(["grade"], 3, "", "Traceback: boom\n")
    assert ordinary._verdict(done, tmp_path, 1.0) == 1
    assert capsys.readouterr().out.startswith("grading as nobody failed (exit 3):\nTraceback")
    rows = {"solution": (FULL, "bwrap"), "stub": ("0", "bwrap"), "cheat": ("0", "bwrap")}
    assert graded(tmp_path, rows, code=1) == 1


# ── the venv nobody grades from ─────────────────────────────────────────────────────────


@pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))
def test_the_venv_imports_this_repository_and_its_packages(tmp_path: Path) -> None:
    python_found = interpreter()
    assert python_found is not None
    python = ordinary.make_venv(tmp_path, python_found, ROOT)
    assert python == tmp_path / "venv" / "bin" / "python"
    said = subprocess.run(
        [str(python), "-c", "import grader, pytest, sys; print(grader.__file__, sys.prefix)"],
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert said == [str(ROOT / "grader" / "__init__.py"), str(tmp_path / "venv")]
    assert os.access(python, os.X_OK)


def test_the_command_run_as_nobody_is_a_command() -> None:
    """The module it runs with ``-m`` parses arguments and says how (a module that is no command
    would run nothing, exit 0, and leave no grades.csv)."""
    done = subprocess.run(
        [sys.executable, "-m", ordinary.COMMAND, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "usage: python -m " + ordinary.COMMAND in done.stdout
