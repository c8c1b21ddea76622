"""`grader.classes.cache`: grades on disk under the content id of all that can change them; a
miss for anything missing, foreign or made by a grader fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.classes import cache as grade_cache
from grader.classes.cache import (
    Cache,
    file_key,
    grade_key,
    grader_digest,
    raw_key,
    replace_file,
    result_from_json,
)
from grader.runtime.results import Outcome, SubmissionResult
from grader.runtime.results import TestResult as Graded
from grader.runtime.sandbox import Limits


def result(*tests: Graded, build: str = "03") -> SubmissionResult:
    return SubmissionResult(build, "ada", "graded", "", tests, 1.5, "out", ("a note",))


PASSED = Graded("t1", 2, 2, "", True, Outcome.PASSED)
WRONG = Graded("t2", 0, 1, "got: 3", False, Outcome.WRONG, "3")
FAULT = Graded("t3", 0, 1, "grader error: no walls", False, Outcome.GRADER_FAULT)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A repo root with the hashed files, and its builds folder with one hidden suite."""
    root = tmp_path / "repo"
    for name in ("etl/a.py", "workbook/b.py", "grader/c.py", "workbook.toml", "requirements.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / "grader" / "__pycache__").mkdir()
    (root / "grader" / "__pycache__" / "c.cpython.pyc").write_bytes(b"\0")
    builds = root / "builds"
    (builds / "build03" / "hidden").mkdir(parents=True)
    (builds / "build03" / "hidden" / "test_x.py").write_text("def test(): pass\n")
    return root, builds


def test_the_grader_digest_changes_with_what_can_change_a_grade(tree: tuple[Path, Path]) -> None:
    root, builds = tree
    limits = Limits()
    first = grader_digest("03", root, builds, limits)
    assert grader_digest("03", root, builds, limits) == first
    (root / "grader" / "__pycache__" / "c.cpython.pyc").write_bytes(b"\1")
    assert grader_digest("03", root, builds, limits) == first  # compiled files say nothing
    assert grader_digest("03", root, builds, Limits(load_seconds=9.0)) != first
    (builds / "build03" / "hidden" / "test_x.py").write_text("def test(): assert 0\n")
    second = grader_digest("03", root, builds, limits)
    assert second != first
    (root / "etl" / "a.py").write_text("changed")
    assert grader_digest("03", root, builds, limits) != second


def test_the_solution_notebook_is_part_of_its_builds_digest(tree: tuple[Path, Path]) -> None:
    root, builds = tree
    before = grader_digest("03", root, builds, Limits())
    (root / "solutions").mkdir()
    (root / "solutions" / "05_other.ipynb").write_text("{}")
    assert grader_digest("03", root, builds, Limits()) == before
    (root / "solutions" / "03_sol.ipynb").write_text("{}")
    assert grader_digest("03", root, builds, Limits()) != before


def test_keys_tell_every_input_apart() -> None:
    keys = {
        grade_key("03", "g", "s"),
        grade_key("03", "g", "s", "t"),
        grade_key("05", "g", "s"),
        grade_key("03", "h", "s"),
        grade_cache.tests_key("03", "g", "t"),
        file_key("03", "g", b"{}"),
        file_key("03", "g", b"{ }"),
        raw_key("03", "g", [[["answer"], "x = 1"]]),
        raw_key("03", "g", [[["answer"], "x = 2"]]),
    }
    assert len(keys) == 9
    assert grade_key("03", "g", "s") == grade_key("03", "g", "s")
    assert all(len(k) == 64 and int(k, 16) >= 0 for k in keys)


def test_a_stored_grade_comes_back_equal(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    stored = result(PASSED, WRONG)
    assert cache.get("ab" * 32) is None
    assert cache.put("ab" * 32, stored) is True
    assert cache.get("ab" * 32) == stored
    assert (tmp_path / "cache" / "ab" / f"{'ab' * 32}.json").is_file()


def test_a_grader_fault_is_never_stored_nor_served(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    assert cache.put("cd" * 32, result(PASSED, FAULT)) is False
    assert not list(tmp_path.rglob("*.json"))
    # One an older grader stored anyway is a miss.
    data = {"key": "cd" * 32, "result": result(PASSED, FAULT).as_json()}
    replace_file(tmp_path / "cd" / f"{'cd' * 32}.json", json.dumps(data))
    assert cache.get("cd" * 32) is None


def test_a_file_not_for_its_key_or_unreadable_is_a_miss(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.put("ef" * 32, result(PASSED))
    path = tmp_path / "ef" / f"{'ef' * 32}.json"
    moved = tmp_path / "12" / f"{'12' * 32}.json"
    moved.parent.mkdir()
    moved.write_text(path.read_text())
    assert cache.get("12" * 32) is None  # another key's grade
    for bad in ("{not json", "[]", '{"key": "' + "ef" * 32 + '"}', ""):
        path.write_text(bad)
        assert cache.get("ef" * 32) is None, bad


def test_aliases_are_kept_only_in_their_shape(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    assert cache.get_alias("aa" * 32) is None
    cache.put_alias("aa" * 32, "key", "source")
    assert cache.get_alias("aa" * 32) == ("key", "source")
    path = tmp_path / "aa" / f"{'aa' * 32}.json"
    path.write_text(json.dumps({"key": "aa" * 32, "alias": 1, "source_id": "s"}))
    assert cache.get_alias("aa" * 32) is None


def test_learner_tests_results_are_stored_unless_unfinished_or_faulty(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.put_tests("bb" * 32, [PASSED, WRONG])
    assert cache.get_tests("bb" * 32) == (PASSED, WRONG)
    for kind in (Outcome.GRADER_FAULT, Outcome.UNFINISHED, Outcome.VOID):
        cache.put_tests("cc" * 32, [PASSED, Graded("t", 0, 1, "", False, kind)])
        assert cache.get_tests("cc" * 32) is None, kind


def test_a_cache_that_cannot_be_written_counts_and_the_grade_stands(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = Cache(blocker)
    assert cache.put("dd" * 32, result(PASSED)) is False
    cache.put_alias("dd" * 32, "k", "s")
    cache.put_tests("dd" * 32, [PASSED])
    assert cache.unwritten == 3


def test_an_entry_without_kinds_reads_as_passed_or_wrong() -> None:
    data = result(PASSED, WRONG).as_json()
    for test in data["tests"]:
        del test["kind"]
    data["tests"][1]["got"] = 5  # not a string: dropped
    back = result_from_json(data)
    assert [t.kind for t in back.tests] == [Outcome.PASSED, Outcome.WRONG]
    assert back.tests[1].got is None
    assert back.notes == ("a note",) and back.seconds == 1.5


def test_replace_file_leaves_no_partial_and_escapes_what_utf8_cannot_hold(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "x.json"
    replace_file(path, "a\udcffb")
    assert path.read_bytes() == b"a\\udcffb"
    replace_file(path, "again")
    assert path.read_text() == "again"
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]
