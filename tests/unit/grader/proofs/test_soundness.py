"""`make check`'s parts as `grader.proofs.soundness` builds them (never run here): their names,
commands, lanes and skip reasons, keys that change when a file they read changes and not
otherwise, and the command line: ``--build`` checked against the builds, what each option
hands on."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import pytest

from grader.proofs import soundness
from workbook.commands import parts
from workbook.commands.parts import Part

FILES = {
    "pyproject.toml": "[project]\n",
    "notebooks/01_concept.ipynb": "{}",
    "etl/sink.py": "x = 1\n",
    "tests/unit/test_sink.py": "def test(): pass\n",
    "tests/browser/test_lab.py": "def test(): pass\n",
    "scripts/tool.py": "print()\n",
    "builds/build03/hidden/seams.py": "y = 2\n",
}


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small repository the parts' keys are taken from (the environment held fixed)."""
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(soundness, "tracked_files", lambda: sorted(FILES))
    monkeypatch.setattr(soundness, "tree_key", functools.partial(parts.tree_key, root=tmp_path))
    monkeypatch.setattr(parts, "environment", lambda: "the same environment")
    return tmp_path


def keys(cores: int = 2) -> dict[str, str | None]:
    return {p.name.split()[0]: p.key for p in soundness.instructor_parts(cores)}


def test_the_parts_in_order_with_their_commands(tree: Path) -> None:
    built = soundness.instructor_parts(2)
    assert [p.name.split(" (")[0] for p in built] == [
        "lint",
        "unit tests",
        "concept notebooks",
        "validity",
        "ordinary user",
        "browser",
    ]
    by = {p.name.split()[0]: p for p in built}
    assert [c[1:] for c in by["lint"].commands] == [
        ("check", "."),
        ("format", "--check", "."),
        ("-m", "mypy"),
    ]
    unit = by["unit"].commands[0]
    assert unit[:4] == (sys.executable, "-m", "pytest", "-q")
    assert "--ignore=tests/browser" in unit and "no:nbval" in unit
    assert by["validity"].commands == ((sys.executable, "-m", "grader.proofs.suite_validity"),)
    assert by["ordinary"].commands == ((sys.executable, "-m", "grader.proofs.ordinary"),)
    assert "--nbval" in by["concept"].commands[0]
    assert all(p.key is not None and p.call is None for p in built)


def test_lanes_at_once_only_with_enough_cores(tree: Path) -> None:
    few = soundness.instructor_parts(soundness.LANE_CORES - 1)
    assert {p.lane for p in few} == {0}
    many = {p.name.split()[0]: p.lane for p in soundness.instructor_parts(soundness.LANE_CORES)}
    assert many["unit"] == 0 and many["browser"] == 1
    assert {many[n] for n in ("lint", "concept", "validity", "ordinary")} == {2}


@pytest.mark.parametrize(
    ("changed", "unchanged"),
    [
        ("notebooks/01_concept.ipynb", {"validity"}),
        ("tests/unit/test_sink.py", {"validity", "concept"}),
        ("scripts/tool.py", {"validity", "concept"}),
        ("etl/sink.py", set()),
        ("builds/build03/hidden/seams.py", {"concept"}),
    ],
)
def test_a_key_changes_when_a_file_its_part_reads_changes(
    tree: Path, changed: str, unchanged: set[str]
) -> None:
    before = keys()
    assert keys() == before  # the same inputs, the same keys
    (tree / changed).write_text("changed\n")
    after = keys()
    same = {name for name in before if before[name] == after[name]}
    assert same == unchanged


def test_every_part_has_its_own_key(tree: Path) -> None:
    assert len(set(keys().values())) == len(keys())


def test_skip_reasons_when_nothing_to_prove_here(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(soundness, "ROOT", tree)  # no solutions/ here
    monkeypatch.setattr(soundness, "ordinary_user_skip", lambda: "not root")
    monkeypatch.setattr(soundness, "CHROMIUM", str(tree / "no-chromium"))
    monkeypatch.setenv("PATH", str(tree / "empty"))
    skips = {p.name.split()[0]: p.skip_reason for p in soundness.instructor_parts(2)}
    assert skips["validity"] == "no build notebooks yet"
    assert skips["ordinary"] == "not root"
    assert skips["browser"] is not None and skips["browser"].startswith(
        "Chromium is not installed (apt-get install chromium)"
    )
    assert skips["lint"] is None and skips["unit"] is None


def test_identity_names_a_program_by_path_size_and_time(tmp_path: Path) -> None:
    program = tmp_path / "bwrap"
    program.write_bytes(b"one")
    first = soundness._identity(str(program))
    assert first.startswith(f"{program}:3:")
    program.write_bytes(b"another")
    assert soundness._identity(str(program)) != first
    assert soundness._identity(None) == "none"
    assert soundness._identity(str(tmp_path / "gone")) == f"{tmp_path / 'gone'}:unreadable"


# ── the command line (nothing run: `run_parts` and the class grading are stand-ins) ─────


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[Part], str | None, bool]]:
    calls: list[tuple[list[Part], str | None, bool]] = []

    def run_parts(chosen: list[Part], only: str | None, *, fresh: bool = False) -> int:
        calls.append((chosen, only, fresh))
        return 0

    monkeypatch.setattr(soundness, "run_parts", run_parts)
    return calls


def test_build_runs_that_builds_validity_alone(
    ran: list[tuple[list[Part], str | None, bool]],
) -> None:
    assert soundness.main(["--build", "5,3"]) == 0
    [(chosen, only, _)] = ran
    assert only is None
    [part] = chosen
    assert part.name == "validity of build 03, 05"
    assert part.commands == (
        (
            sys.executable,
            "-m",
            "grader.proofs.suite_validity",
            "--build=03",
            "--build=05",
        ),
    )


def test_an_unknown_build_is_refused_with_the_valid_ones(
    ran: list[tuple[list[Part], str | None, bool]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert soundness.main(["--build", "99"]) == 2
    assert capsys.readouterr().out.strip() == (
        "BUILD=99: no build 99 here; the builds are 03, 05, 07, 08."
    )
    assert ran == []


def test_only_and_fresh_are_handed_to_the_parts(
    tree: Path, ran: list[tuple[list[Part], str | None, bool]]
) -> None:
    assert soundness.main(["--only", "lint", "--fresh"]) == 0
    [(chosen, only, fresh)] = ran
    assert only == "lint" and fresh is True
    assert [p.name for p in chosen] == [p.name for p in soundness.instructor_parts()]


def test_submissions_grade_a_class_with_the_builds_checked(
    monkeypatch: pytest.MonkeyPatch,
    ran: list[tuple[list[Part], str | None, bool]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    graded: list[argparse.Namespace] = []

    def grade(args: argparse.Namespace) -> int:
        graded.append(args)
        return 0

    monkeypatch.setattr(soundness, "grade_class_as_handed_in", grade)
    argv = ["--submissions", "class", "--build", "3", "--walls", "off", "--feedback", "full"]
    assert soundness.main(argv) == 0
    [args] = graded
    assert args.submissions == Path("class") and args.out == Path("grades")
    assert args.build == ["03"] and args.walls == "off" and args.feedback == "full"
    assert ran == []
    assert soundness.main(["--submissions", "class", "--build", "04"]) == 2
    assert "no build 04 here" in capsys.readouterr().out
    assert len(graded) == 1


def test_an_unknown_layout_is_refused_before_grading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "class" / "ann").mkdir(parents=True)
    where = ["--submissions", str(tmp_path / "class"), "--out", str(tmp_path / "out")]
    code = soundness.main([*where, "--layout", "blackboard"])
    assert code == 2
    assert capsys.readouterr().out.startswith("LAYOUT=blackboard: not one of auto, ")
    assert not (tmp_path / "out" / "grades.csv").exists()
