"""`grader.runtime.cleanup`: removing what grading leaves behind, whatever a learner put in
it, without following a link and without raising."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from grader.runtime.cleanup import remove_partials, remove_stale_scratch, remove_tree


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_remove_tree_removes_files_folders_and_links_but_not_their_targets(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f.txt").write_text("x")
    (tree / "link").symlink_to(outside)
    (tree / "dirlink").symlink_to(tmp_path)
    os.mkfifo(tree / "a" / "fifo")
    removal = remove_tree(tree)
    assert removal.complete and removal.left == []
    assert removal.removed == 7  # 3 folders, a file, two links, a FIFO
    assert not tree.exists() and outside.read_text() == "keep me"


def test_remove_tree_empties_a_deep_chain_and_unusable_folders(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    deep = tree
    for _ in range(300):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "last.txt").write_text("x")
    locked = tree / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "f").write_text("x")
    os.chmod(locked / "inner", 0)
    os.chmod(locked, 0o500)
    assert remove_tree(tree).complete
    assert not tree.exists()


def test_a_missing_path_is_already_gone_and_removing_twice_reports_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "t").mkdir()
    assert remove_tree(tmp_path / "t").removed == 1
    again = remove_tree(tmp_path / "t")
    assert (again.removed, again.left) == (0, [])
    assert remove_tree(tmp_path / "no" / "such").complete


def test_remove_tree_stops_after_its_budget_and_says_so(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for n in range(10):
        (tree / f"f{n}").write_text("x")
    removal = remove_tree(tree, max_entries=4)
    assert removal.removed == 4
    assert removal.left == ["stopped after 4 entries"] and not removal.complete
    assert tree.exists() and len(list(tree.iterdir())) == 6


def test_a_single_file_is_removed(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert remove_tree(tmp_path / "f").removed == 1
    assert not (tmp_path / "f").exists()


def test_stale_scratch_of_a_dead_process_goes_and_a_live_one_stays(tmp_path: Path) -> None:
    gone = tmp_path / f"rit-{dead_pid()}-run-abc"
    (gone / "work").mkdir(parents=True)
    (gone / "work" / "f").write_text("x")
    mine = tmp_path / f"rit-{os.getpid()}-run-abc"
    parent = tmp_path / f"rit-{os.getppid()}-run-abc"  # a live process's
    other = tmp_path / "not-ours"
    for folder in (mine, parent, other):
        folder.mkdir()
    assert remove_stale_scratch(tmp_path) == []
    assert not gone.exists()
    assert mine.exists() and parent.exists() and other.exists()


def test_stale_scratch_in_a_missing_folder_is_reported_not_raised(tmp_path: Path) -> None:
    problems = remove_stale_scratch(tmp_path / "absent")
    assert problems == [f"{tmp_path / 'absent'}: could not be listed: No such file or directory"]


def test_partials_of_dead_processes_are_removed_and_others_kept(tmp_path: Path) -> None:
    dead = tmp_path / f".rit-{dead_pid()}-1.tmp"
    live = tmp_path / f".rit-{os.getpid()}-1.tmp"
    final = tmp_path / "grades.csv"
    for path in (dead, live, final):
        path.write_text("x")
    (tmp_path / f".rit-{dead_pid()}-2.tmp").mkdir()  # a folder of that name is not ours
    assert remove_partials(tmp_path) == 1
    assert not dead.exists() and live.exists() and final.exists()
    assert remove_partials(tmp_path / "absent") == 0
