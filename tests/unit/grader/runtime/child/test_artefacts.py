"""`grader.runtime.child.artefacts`: what a worker left is copied out with bounds, regular
files and folders only, never through a link."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.runtime.child import artefacts
from grader.runtime.child.artefacts import copy_tree, open_folder


def copy(source: Path, dest: Path) -> tuple[int, int]:
    dest.mkdir()
    src, dst = open_folder(str(source)), open_folder(str(dest))
    try:
        return copy_tree(src, dst)
    finally:
        os.close(src)
        os.close(dst)


def listing(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def test_files_and_folders_are_copied_as_they_are(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "sub" / "deeper").mkdir(parents=True)
    (work / "a.txt").write_bytes(b"a")
    (work / "sub" / "deeper" / "b.bin").write_bytes(b"\x00" * 3000)
    assert copy(work, tmp_path / "kept") == (2, 0)
    assert listing(tmp_path / "kept") == listing(work)
    assert copy(work, tmp_path / "again") == (2, 0)  # the same copy every time
    assert listing(tmp_path / "again") == listing(work)


def test_links_fifos_and_too_deep_folders_are_dropped_and_counted(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the answers")
    work = tmp_path / "work"
    deep = work.joinpath(*["d"] * (artefacts.MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    (work / "link").symlink_to(secret)
    (work / "folder-link").symlink_to(tmp_path)
    os.mkfifo(work / "fifo")
    (work / "ok.txt").write_text("mine")
    kept, dropped = copy(work, tmp_path / "kept")
    assert kept == 1 and dropped == 4  # two links, the FIFO, the folder below MAX_DEPTH
    names = set(listing(tmp_path / "kept"))
    assert "ok.txt" in names and not {"link", "folder-link", "fifo"} & names
    assert max(name.count("/") for name in names) == artefacts.MAX_DEPTH - 1


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(artefacts, "MAX_FILES", 3)
    monkeypatch.setattr(artefacts, "MAX_BYTES", 100)
    yield


def test_files_past_the_count_or_size_bounds_are_dropped(
    tmp_path: Path, small_bounds: None
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "big").write_bytes(b"x" * 101)
    for n in range(5):
        (work / f"f{n}").write_bytes(b"y" * 10)
    kept, dropped = copy(work, tmp_path / "kept")
    assert (kept, dropped) == (3, 3)
    assert "big" not in listing(tmp_path / "kept")


def test_open_folder_refuses_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.close(open_folder(str(tmp_path / "real")))
    with pytest.raises(OSError, match=r"Too many levels of symbolic links|Not a directory"):
        open_folder(str(tmp_path / "link"))
