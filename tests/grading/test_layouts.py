"""Submissions in the layouts instructors get: detected, staged one folder per learner, and
graded to the same grades as the same notebooks in today's layout.

Every download is built here with `zipfile` (and the real git for GitHub Classroom clones),
named as the LMS names it. Hostile zips (paths out of the folder, links, devices, bombs, lying
headers) are built by hand, and each refusal must say why.
"""

from __future__ import annotations

import csv
import hashlib
import random
import stat
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.classes import layouts
from grader.classes.layouts import LayoutError, detect, stage
from grader.classes.zips import MAX_MEMBERS, archive_problem, member_problem, unpack
from tests.grading.fixtures.downloads import (
    canvas_name,
    canvas_zip,
    git_clones,
    moodle_folder,
    moodle_zip,
    notebooks,
    write_folders,
    zip_tree,
)

NB = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
BUILD03 = "03_build_retry_and_sink.ipynb"


def tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its digest: what "unchanged" means here."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# ---------------------------------------------------------------------------------------
# Today's layout: untouched.


def test_a_plain_folder_is_graded_in_place_and_nothing_is_written(tmp_path: Path) -> None:
    klass = write_folders(tmp_path / "class", {"ada": {BUILD03: NB}, "bob": {BUILD03: NB}})
    before = tree(klass)
    staged = stage(klass, into=tmp_path / "staged")
    assert detect(klass) == "folders"
    assert staged.in_place and staged.folder == klass and staged.layout == "folders"
    assert [x.learner for x in staged.learners] == ["ada", "bob"]
    assert not (tmp_path / "staged").exists()
    assert tree(klass) == before


def test_a_zip_of_the_class_is_unpacked_whatever_its_name(tmp_path: Path) -> None:
    files = {f"submissions/{who}/{BUILD03}": NB for who in ("ada", "bob")}
    files["submissions/bob/notes/readme.txt"] = b"hi"
    # One folder of learners' folders: the class, whatever the zip and the folder are called.
    path = zip_tree(tmp_path / "week3-export.zip", files)
    assert detect(path) == "folders"
    staged = stage(path, into=tmp_path / "staged")
    assert staged.folder == tmp_path / "staged" / "class"
    assert tree(staged.folder) == {
        f"ada/{BUILD03}": hashlib.sha256(NB).hexdigest(),
        f"bob/{BUILD03}": hashlib.sha256(NB).hexdigest(),
        "bob/notes/readme.txt": hashlib.sha256(b"hi").hexdigest(),
    }
    # One learner's whole copy in a zip is not mistaken for a class.
    copy = zip_tree(tmp_path / "ada.zip", {f"ada/exercises/{BUILD03}": NB, "ada/README.md": b""})
    assert [x.learner for x in stage(copy, into=tmp_path / "again").learners] == ["ada"]


def test_staging_again_gives_the_same_folder_and_never_replaces_a_stranger(
    tmp_path: Path,
) -> None:
    path = zip_tree(tmp_path / "c.zip", {f"c/ada/{BUILD03}": NB})
    first = tree(stage(path, into=tmp_path / "staged").folder)
    assert tree(stage(path, into=tmp_path / "staged").folder) == first
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(LayoutError, match="not made by staging"):
        stage(path, into=tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


# ---------------------------------------------------------------------------------------
# Canvas.


def test_canvas_names_late_flags_and_the_latest_resubmission(tmp_path: Path) -> None:
    files = {
        canvas_name("smithjane", 101, 9001, BUILD03, late="LATE"): b"first",
        canvas_name("smithjane", 101, 9002, "03_build_retry_and_sink-2.ipynb", "LATE"): b"third",
        canvas_name("smithjane", 101, 9003, "03_build_retry_and_sink-1.ipynb"): b"second",
        canvas_name("doejohn", 102, 9004, BUILD03, late="late"): b"john",
        canvas_name("doejohn", 102, 9005, "notes.txt"): b"notes",
        canvas_name("leeann", 103, 9006, BUILD03): b"ann",
        "index.html": b"<html>",
    }
    path = canvas_zip(tmp_path / "submissions.zip", files)
    assert detect(path) == "canvas"
    staged = stage(path, into=tmp_path / "staged")
    by = {x.learner: x for x in staged.learners}
    assert sorted(by) == ["doejohn", "leeann", "smithjane"]
    assert (staged.folder / "smithjane" / BUILD03).read_bytes() == b"third"
    assert sorted(p.name for p in (staged.folder / "smithjane").iterdir()) == [BUILD03]
    assert by["smithjane"].late and by["doejohn"].late and not by["leeann"].late
    assert (by["smithjane"].user_id, by["smithjane"].submission_id) == ("101", "9002")
    assert by["smithjane"].prefix == "smithjane_LATE_101_9002"
    older = " ".join(by["smithjane"].notes)
    assert "03_build_retry_and_sink-1.ipynb: an earlier submission" in older
    assert f"smithjane_LATE_101_9001_{BUILD03}: an earlier submission" in older
    assert (staged.folder / "doejohn" / "notes.txt").read_bytes() == b"notes"
    assert any(n.startswith("index.html: not a Canvas submission") for n in staged.notes)


def test_canvas_learners_sharing_a_name_are_told_apart_stably(tmp_path: Path) -> None:
    files = {
        canvas_name("leeann", 301, 1, BUILD03): b"one",
        canvas_name("leeann", 302, 2, BUILD03): b"two",
        canvas_name("kimbo", 303, 3, BUILD03): b"kim",
    }
    folder = write_folders(tmp_path, {"download": files}) / "download"  # an unzipped download
    assert detect(folder) == "canvas"
    first = stage(folder, into=tmp_path / "a")
    assert [x.learner for x in first.learners] == ["kimbo", "leeann_301", "leeann_302"]
    assert (first.folder / "leeann_302" / BUILD03).read_bytes() == b"two"
    # The same names whatever order the files come in: the ids decide, not the listing.
    again = {k: files[k] for k in reversed(list(files))}
    second = stage(canvas_zip(tmp_path / "r.zip", again), into=tmp_path / "b")
    assert [x.learner for x in second.learners] == [x.learner for x in first.learners]


# ---------------------------------------------------------------------------------------
# Moodle.


def test_moodle_folders_flat_files_and_a_learners_own_zip(tmp_path: Path) -> None:
    inner = tmp_path / "work.zip"
    zip_tree(inner, {f"work/{BUILD03}": b"ann's", "work/data.csv": b"1,2"})
    folders = {
        moodle_folder("Jane Smith", 201): {BUILD03: b"jane"},
        moodle_folder("John Doe", 202, since_41=True): {f"sub/{BUILD03}": b"john"},
        moodle_folder("Ann Lee", 203): {"work.zip": inner.read_bytes()},
        "Kim O_Brien_204_assignsubmission_onlinetext_": {"onlinetext.html": b"<p>hi</p>"},
    }
    path = moodle_zip(tmp_path / "CS101-Run It Twice-42.zip", folders)
    assert detect(path) == "moodle"
    staged = stage(path, into=tmp_path / "staged")
    by = {x.learner: x for x in staged.learners}
    assert sorted(by) == ["Ann Lee_203", "Jane Smith_201", "John Doe_202", "Kim O_Brien_204"]
    assert (staged.folder / "Jane Smith_201" / BUILD03).read_bytes() == b"jane"
    assert (staged.folder / "John Doe_202" / "sub" / BUILD03).read_bytes() == b"john"
    assert (staged.folder / "Ann Lee_203" / "work" / "work" / BUILD03).read_bytes() == b"ann's"
    assert not list((staged.folder / "Ann Lee_203").rglob("*.zip"))
    assert by["Jane Smith_201"].prefix == "Jane Smith_201_assignsubmission_file_"
    assert by["John Doe_202"].prefix == "John Doe_202_assignsubmission_file"
    assert (by["Kim O_Brien_204"].name, by["Kim O_Brien_204"].user_id) == ("Kim O_Brien", "204")


def test_moodle_flat_download_without_folders(tmp_path: Path) -> None:
    flat = {f"Jane Smith_201_assignsubmission_file_{BUILD03}": b"jane"}
    staged = stage(write_folders(tmp_path, {"d": flat}) / "d", into=tmp_path / "s")
    assert staged.layout == "moodle"
    assert (staged.folder / "Jane Smith_201" / BUILD03).read_bytes() == b"jane"


# ---------------------------------------------------------------------------------------
# GitHub Classroom.


def test_git_clones_are_graded_in_place_with_their_commit(tmp_path: Path) -> None:
    klass = tmp_path / "run-it-twice-submissions"
    commits = git_clones(klass, {"run-it-twice-ada": {BUILD03: NB}, "run-it-twice-bo": {}})
    assert detect(klass) == "git"
    staged = stage(klass, into=tmp_path / "staged")
    assert staged.in_place and staged.folder == klass
    assert {x.learner: x.commit for x in staged.learners} == commits


# ---------------------------------------------------------------------------------------
# Zips that must not be trusted.


def hostile_zip(path: Path, members: list[tuple[str, int, bytes]]) -> Path:
    """A zip whose members carry the given Unix modes, as a hostile tool writes them."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, mode, data in members:
            info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = mode << 16
            archive.writestr(info, data)
    return path


@pytest.mark.parametrize(
    ("name", "mode", "why"),
    [
        ("../escape.ipynb", stat.S_IFREG | 0o644, "outside the archive"),
        ("ok/../../escape.ipynb", stat.S_IFREG | 0o644, "outside the archive"),
        ("/etc/escape.ipynb", stat.S_IFREG | 0o644, "outside the archive"),
        ("C:/escape.ipynb", stat.S_IFREG | 0o644, "outside the archive"),
        ("ok\\..\\escape.ipynb", stat.S_IFREG | 0o644, "backslash"),
        ("ada/link.ipynb", stat.S_IFLNK | 0o777, "symbolic link"),
        ("ada/fifo.ipynb", stat.S_IFIFO | 0o644, "not a regular file"),
        ("ada/dev.ipynb", stat.S_IFCHR | 0o644, "not a regular file"),
        ("ada/" + "d/" * 80 + "deep.ipynb", stat.S_IFREG | 0o644, "folders deep (limit 64)"),
    ],
)
def test_an_unsafe_member_is_refused_with_a_reason(
    tmp_path: Path, name: str, mode: int, why: str
) -> None:
    path = hostile_zip(
        tmp_path / "class.zip",
        [(f"class/ada/{BUILD03}", stat.S_IFREG | 0o644, NB), (name, mode, b"/etc/passwd")],
    )
    staged = stage(path, into=tmp_path / "staged")
    assert any(why in note for note in staged.notes), staged.notes
    assert (staged.folder / "ada" / BUILD03).read_bytes() == NB
    written = [p for p in tmp_path.rglob("*") if "escape" in p.name or p.is_symlink()]
    assert written == []
    assert not any(p.name in ("fifo.ipynb", "dev.ipynb", "deep.ipynb") for p in tmp_path.rglob("*"))


def test_a_zip_bomb_member_is_refused_before_it_is_written(tmp_path: Path) -> None:
    # 8 MiB of zeros deflate to about 8 KiB, a thousand to one; the rest of the class does not
    # compress, so only the bomb is refused, not the archive.
    files = {f"c/ada/{BUILD03}": NB, "c/ada/bomb.bin": bytes(8 << 20)}
    files["c/bob/photo.png"] = random.Random(3).randbytes(1 << 20)
    staged = stage(zip_tree(tmp_path / "c.zip", files), into=tmp_path / "staged")
    assert any("bomb.bin: not extracted: compressed" in n for n in staged.notes), staged.notes
    assert not (staged.folder / "ada" / "bomb.bin").exists()
    assert (staged.folder / "ada" / BUILD03).read_bytes() == NB


def test_an_archive_that_is_mostly_bomb_is_refused_whole(tmp_path: Path) -> None:
    path = zip_tree(tmp_path / "c.zip", {f"c/ada/{BUILD03}": NB, "c/ada/z.bin": bytes(8 << 20)})
    with pytest.raises(LayoutError, match=r"c\.zip: refused: compressed \d+ to 1 as a whole"):
        stage(path, into=tmp_path / "staged")


def test_a_member_over_64_mib_is_refused() -> None:
    info = zipfile.ZipInfo("ada/big.bin")
    info.file_size, info.compress_size = 65 << 20, 65 << 20
    assert member_problem(info) == "65 MiB unpacked (limit 64 MiB)"
    info.file_size = 64 << 20
    assert member_problem(info) is None


def test_an_archive_over_its_bounds_is_refused_whole(tmp_path: Path) -> None:
    path = zip_tree(tmp_path / "c.zip", {f"c/ada/{BUILD03}": NB})
    # Claim 3.75 GiB unpacked in the central directory, as a bomb's header does.
    data = bytearray(path.read_bytes())
    at = data.index(b"PK\x01\x02")
    data[at + 24 : at + 28] = struct.pack("<I", 0xF0000000)
    path.write_bytes(bytes(data))
    with pytest.raises(LayoutError, match="refused: 3840 MiB unpacked"):
        stage(path, into=tmp_path / "staged")
    infos = [zipfile.ZipInfo(f"f{i}") for i in range(MAX_MEMBERS + 1)]
    assert archive_problem(infos, 1) == f"{MAX_MEMBERS + 1} members (limit {MAX_MEMBERS})"


def test_a_member_whose_header_lies_is_a_note_not_more_bytes(tmp_path: Path) -> None:
    path = zip_tree(tmp_path / "c.zip", {"ada/a.txt": b"x" * 1000})
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        at = data.index(signature)
        data[at + offset : at + offset + 4] = struct.pack("<I", 10)  # "10 bytes unpacked"
    path.write_bytes(bytes(data))
    notes = unpack(path, tmp_path / "out")
    assert notes and "ada/a.txt: not extracted" in notes[0]
    assert not (tmp_path / "out" / "ada" / "a.txt").exists() or (
        (tmp_path / "out" / "ada" / "a.txt").stat().st_size <= 10
    )


def test_a_learners_own_bomb_is_their_note_and_the_class_goes_on(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.zip"
    zip_tree(bomb, {f"x{i}.bin": bytes(2 << 20) for i in range(1)})
    data = bytearray(bomb.read_bytes())
    at = data.index(b"PK\x01\x02")
    data[at + 24 : at + 28] = struct.pack("<I", 0xF0000000)
    bomb.write_bytes(bytes(data))
    files = {
        canvas_name("smithjane", 101, 1, "work.zip"): bomb.read_bytes(),
        canvas_name("doejohn", 102, 2, BUILD03): NB,
    }
    staged = stage(canvas_zip(tmp_path / "s.zip", files), into=tmp_path / "staged")
    jane = staged.learner("smithjane")
    assert jane is not None and any("work.zip: refused" in n for n in jane.notes), jane
    assert (staged.folder / "doejohn" / BUILD03).read_bytes() == NB


def test_a_name_too_long_for_a_folder_is_bounded(tmp_path: Path) -> None:
    name = "学" * 70  # 210 bytes of UTF-8: a folder name, but too long to build names on
    files = {moodle_folder(name, 7): {BUILD03: NB}}
    staged = stage(moodle_zip(tmp_path / "m.zip", files), into=tmp_path / "staged")
    (learner,) = staged.learners
    assert len(learner.learner.encode()) <= layouts.MAX_NAME_BYTES
    assert (staged.folder / learner.learner / BUILD03).read_bytes() == NB


def test_not_a_zip_is_refused_with_its_name(tmp_path: Path) -> None:
    (tmp_path / "class.zip").write_bytes(b"not a zip at all")
    with pytest.raises(LayoutError, match=r"class\.zip: not a readable zip"):
        detect(tmp_path / "class.zip")


# ---------------------------------------------------------------------------------------
# Done when: each layout's fixture gets the same grades as today's layout.

#: The class: every solution, every stub, and a learner between (07 not handed in).
CLASS = {
    "sol": {"03": "solution", "05": "solution", "07": "solution", "08": "solution"},
    "stub": {"03": "exercise", "05": "exercise", "07": "exercise", "08": "exercise"},
    "mixed": {"03": "solution", "05": "exercise", "08": "solution"},
}


Row = dict[str, str]


def rows(out: Path) -> dict[str, Row]:
    """``grades.csv`` by learner, each row without its learner column."""
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    return {row.pop("learner"): row for row in table}


def canvas_class(tmp: Path) -> tuple[Path, dict[str, str]]:
    ids = {"sol": ("smithjane", 101), "stub": ("doejohn", 102), "mixed": ("leeann", 103)}
    files = {}
    for who, kinds in CLASS.items():
        name, user = ids[who]
        for i, (file, data) in enumerate(notebooks(kinds).items()):
            late = "LATE" if who == "sol" else ""
            files[canvas_name(name, user, 9000 + i, file, late)] = data
    # Jane handed 03 in twice: the stub first, then the solution as Canvas's "-1".
    stub03 = notebooks({"03": "exercise"})[BUILD03]
    files[canvas_name("smithjane", 101, 8999, BUILD03, "LATE")] = stub03
    solution03 = files.pop(canvas_name("smithjane", 101, 9000, BUILD03, "LATE"))
    files[canvas_name("smithjane", 101, 9000, BUILD03.replace(".ipynb", "-1.ipynb"))] = solution03
    path = canvas_zip(tmp / "submissions.zip", files)
    return path, {name: who for who, (name, _) in ids.items()}


def moodle_class(tmp: Path) -> tuple[Path, dict[str, str]]:
    ids = {"sol": ("Jane Smith", 201), "stub": ("John Doe", 202), "mixed": ("Ann Lee", 203)}
    folders: dict[str, dict[str, bytes]] = {}
    for who, kinds in CLASS.items():
        name, number = ids[who]
        folders[moodle_folder(name, number, since_41=who == "stub")] = notebooks(kinds)
    # Ann uploaded one zip of her work.
    work = zip_tree(
        tmp / "work.zip", {f"work/{f}": d for f, d in notebooks(CLASS["mixed"]).items()}
    )
    folders[moodle_folder("Ann Lee", 203)] = {"work.zip": work.read_bytes()}
    path = moodle_zip(tmp / "CS101-Run It Twice-42.zip", folders)
    return path, {f"{name}_{n}": who for who, (name, n) in ids.items()}


def git_class(tmp: Path) -> tuple[Path, dict[str, str]]:
    names = {who: f"run-it-twice-{who}" for who in CLASS}
    git_clones(tmp / "clones", {names[w]: notebooks(kinds) for w, kinds in CLASS.items()})
    return tmp / "clones", {name: who for who, name in names.items()}


def zipped_class(tmp: Path) -> tuple[Path, dict[str, str]]:
    files = {f"cls/{w}/{f}": d for w, kinds in CLASS.items() for f, d in notebooks(kinds).items()}
    return zip_tree(tmp / "cls.zip", files), {w: w for w in CLASS}


Maker = Callable[[Path], tuple[Path, dict[str, str]]]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Row]:
    from grader.classes.batch import grade_class

    base = tmp_path_factory.mktemp("today")
    klass = write_folders(base / "class", {w: notebooks(k) for w, k in CLASS.items()})
    grade_class(klass, base / "grades")
    return rows(base / "grades")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "make"),
    [
        ("canvas", canvas_class),
        ("moodle", moodle_class),
        ("git", git_class),
        ("folders", zipped_class),
    ],
)
def test_each_layout_grades_like_todays_layout(
    tmp_path: Path, baseline: dict[str, Row], layout: str, make: Maker
) -> None:
    from grader.classes.batch import grade_class

    path, learners = make(tmp_path)
    assert detect(path) == layout
    staged = stage(path, into=tmp_path / "staged")
    grade_class(staged.folder, tmp_path / "grades")
    graded = rows(tmp_path / "grades")
    assert sorted(graded) == sorted(learners)
    assert {learners[name]: row for name, row in graded.items()} == baseline
    assert baseline["sol"]["total"] == baseline["sol"]["max"], "a solution missed a point"
    assert baseline["stub"]["total"] == "0", "a stub earned a point"
