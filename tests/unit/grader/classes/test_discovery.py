"""`grader.classes.discovery`: a class's learners and each one's notebook per build, found in a
temp folder of learners (folders, zips, links, stray files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.classes import discovery
from grader.classes.discovery import NOT_SUBMITTED, find_notebook, scan_class, scan_learner
from workbook.shared.manifest import Entry, load_manifest

ENTRY: Entry = load_manifest().entry("03")
NAME = Path(ENTRY.path).name


def touch(path: Path, text: str = "{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_folder_is_a_learner_and_a_lone_zip_stands_for_one(tmp_path: Path) -> None:
    (tmp_path / "bo").mkdir()
    (tmp_path / ".dot").mkdir()
    (tmp_path / ".git").mkdir()
    touch(tmp_path / "ada.zip", "PK")
    touch(tmp_path / "bo.zip", "PK")
    touch(tmp_path / "notes.txt", "x")
    found = scan_class(tmp_path)
    assert [(x.name, x.folder, x.zips) for x in found.learners] == [
        (".dot", tmp_path / ".dot", []),
        ("ada", None, ["ada.zip"]),
        ("bo", tmp_path / "bo", ["bo.zip"]),
    ]
    assert [name for name, _ in found.not_graded] == [".git", "notes.txt"]
    assert "not a learner's folder: not graded" in dict(found.not_graded)["notes.txt"]
    assert discovery.learner_folders(tmp_path) == [tmp_path / ".dot", tmp_path / "bo"]


def test_scanning_twice_gives_the_same_answer(tmp_path: Path) -> None:
    for name in ("c", "a", "b"):
        touch(tmp_path / name / "x" / NAME)
    assert scan_class(tmp_path) == scan_class(tmp_path)
    assert scan_learner(tmp_path / "a") == scan_learner(tmp_path / "a")


def test_the_notebook_is_found_by_its_number_hidden_folders_aside(tmp_path: Path) -> None:
    folder = tmp_path / "ada"
    touch(folder / "work" / "03_mine.ipynb")
    touch(folder / ".pristine" / NAME)
    touch(folder / ".ipynb_checkpoints" / "03_mine-checkpoint.ipynb")
    touch(folder / "__pycache__" / "03_x.ipynb")
    found = find_notebook(folder, ENTRY)
    assert found == discovery.Found(folder / "work" / "03_mine.ipynb", None, "work/03_mine.ipynb")


def test_of_several_candidates_the_manifest_path_then_name_wins(tmp_path: Path) -> None:
    folder = tmp_path / "ada"
    touch(folder / "03_draft.ipynb")
    touch(folder / "old" / NAME)
    assert find_notebook(folder, ENTRY).shown == f"old/{NAME}"
    touch(folder / ENTRY.path)
    assert find_notebook(folder, ENTRY).shown == ENTRY.path


def test_two_unnamed_candidates_ask_for_one(tmp_path: Path) -> None:
    folder = tmp_path / "ada"
    touch(folder / "03_a.ipynb")
    touch(folder / "03_b.ipynb")
    found = find_notebook(folder, ENTRY)
    assert found.path is None
    assert found.problem == "2 notebooks for build 03 (03_a.ipynb, 03_b.ipynb): hand in one"


def test_a_missing_notebook_says_not_submitted_or_names_the_zip(tmp_path: Path) -> None:
    folder = tmp_path / "ada"
    touch(folder / "05_other.ipynb")
    assert find_notebook(folder, ENTRY).problem == NOT_SUBMITTED
    touch(folder / "work.zip", "PK")
    problem = find_notebook(folder, ENTRY).problem
    assert problem is not None and problem.startswith("handed in as a zip (work.zip)")


def test_a_symlink_named_like_the_notebook_is_never_followed(tmp_path: Path) -> None:
    target = touch(tmp_path / "solution.ipynb")
    folder = tmp_path / "ada"
    folder.mkdir()
    (folder / NAME).symlink_to(target)
    found = find_notebook(folder, ENTRY)
    assert found.path is None
    assert found.problem == f"{NAME} is a symlink, not a notebook file: hand in the file"


def test_a_folder_named_like_the_notebook_is_not_one(tmp_path: Path) -> None:
    folder = tmp_path / "ada"
    (folder / NAME).mkdir(parents=True)
    assert find_notebook(folder, ENTRY).problem == (
        f"{NAME} is a folder, not a notebook file: hand in the notebook"
    )


def test_a_learner_that_is_a_file_cannot_be_graded(tmp_path: Path) -> None:
    path = touch(tmp_path / "ada")
    scanned = scan_learner(path)
    assert scanned.problem is not None and scanned.problem.startswith("the learner's folder is ")
    assert find_notebook(scanned, ENTRY) == discovery.Found(None, scanned.problem)
    missing = scan_learner(tmp_path / "nobody")
    assert missing.problem is not None and "cannot be read" in missing.problem


def test_the_walk_stops_at_its_bounds_and_says_so(tmp_path: Path) -> None:
    deep = tmp_path / "ada" / "a" / "b" / "c"
    touch(deep / NAME)
    shallow = scan_learner(tmp_path / "ada", max_depth=2)
    assert shallow.notebooks == []
    assert shallow.notes == ["folders nested deeper than 2 levels were not searched for notebooks"]
    assert scan_learner(tmp_path / "ada").notebooks == [f"a/b/c/{NAME}"]
    for i in range(5):
        touch(tmp_path / "bo" / f"f{i}.txt")
    few = scan_learner(tmp_path / "bo", max_entries=3)
    assert few.notes and "more than 3 files and folders" in few.notes[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_with_a_notebooks_name_gets_a_reason(tmp_path: Path) -> None:
    folder = tmp_path / "ada"
    folder.mkdir()
    os.mkfifo(folder / NAME)
    problem = find_notebook(folder, ENTRY).problem
    assert problem is not None and problem.startswith(f"{NAME} is ")
    assert problem.endswith("not a notebook file: hand in the notebook")
