"""`grader.classes.zips`: zips read without trusting them (bad members are notes, a bad archive
is refused) and written so the same files give the same bytes."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from grader.classes import zips
from grader.classes.zips import ZipRefused, archive_problem, member_problem, unpack, write_zip


def info(name: str, **fields: int) -> zipfile.ZipInfo:
    made = zipfile.ZipInfo(name)
    for key, value in fields.items():
        setattr(made, key, value)
    return made


def test_the_same_files_give_the_same_bytes(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {"b.txt": "two", "a/x.py": b"one", "run.sh": "#!/bin/sh\n"}
    write_zip(tmp_path / "one.zip", files, executable=["run.sh"])
    write_zip(tmp_path / "two.zip", dict(reversed(list(files.items()))), executable=["run.sh"])
    assert (tmp_path / "one.zip").read_bytes() == (tmp_path / "two.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "one.zip") as archive:
        assert archive.namelist() == ["a/x.py", "b.txt", "run.sh"]
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
        assert {i.date_time for i in archive.infolist()} == {zips.ZIP_TIME}
    assert stat.S_IMODE(modes["run.sh"]) == 0o755 and stat.S_IMODE(modes["b.txt"]) == 0o644
    assert not list(tmp_path.glob(".*.tmp"))


def test_unpack_extracts_the_safe_members_and_notes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "in.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ada/03_x.ipynb", "{}")
        archive.writestr("../evil.txt", "no")
        archive.writestr("__MACOSX/._03_x.ipynb", "fork")
        link = zipfile.ZipInfo("ada/link.ipynb")
        link.create_system = 3
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    notes = unpack(path, tmp_path / "out")
    assert (tmp_path / "out" / "ada" / "03_x.ipynb").read_text() == "{}"
    assert notes == [
        "../evil.txt: not extracted: a path outside the archive's folder",
        "ada/link.ipynb: not extracted: a symbolic link",
    ]
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "out" / "__MACOSX").exists()
    assert not (tmp_path / "out" / "ada" / "link.ipynb").exists()


def test_a_member_named_twice_keeps_its_first_copy(tmp_path: Path) -> None:
    path = tmp_path / "twice.zip"
    with pytest.warns(UserWarning), zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.txt", "first")
        archive.writestr("a.txt", "second")
    notes = unpack(path, tmp_path / "out")
    assert (tmp_path / "out" / "a.txt").read_text() == "first"
    assert len(notes) == 1 and notes[0].startswith("a.txt: not extracted: ")


def test_what_is_not_a_zip_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "fake.zip"
    path.write_text("not a zip at all")
    with pytest.raises(ZipRefused, match=r"^fake\.zip: not a readable zip"):
        unpack(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("name", "fields", "why"),
    [
        ("/etc/x", {}, "a path outside the archive's folder"),
        ("C:stuff", {}, "a path outside the archive's folder"),
        ("a\\b", {}, "a name with a backslash or a control character"),
        ("a\nb", {}, "a name with a backslash or a control character"),
        ("/".join(["d"] * 65), {}, "65 folders deep (limit 64)"),
        ("fifo", {"create_system": 3, "external_attr": (stat.S_IFIFO | 0o644) << 16}, "not a"),
        ("secret", {"flag_bits": 0x1}, "encrypted"),
        ("ppmd", {"compress_type": 98}, "compression method 98"),
        ("big", {"file_size": zips.MAX_MEMBER_BYTES + 1}, "64 MiB unpacked (limit 64 MiB)"),
        ("bomb", {"file_size": 2**21, "compress_size": 2**10}, "compressed 2048 to 1"),
    ],
)
def test_an_unsafe_member_gets_its_reason(name: str, fields: dict[str, int], why: str) -> None:
    problem = member_problem(info(name, **fields))
    assert problem is not None and problem.startswith(why)


def test_a_plain_member_is_safe() -> None:
    assert member_problem(info("ada/03_x.ipynb", file_size=2**21, compress_size=2**16)) is None
    assert member_problem(info("tiny", file_size=10_000, compress_size=1)) is None  # below floor


def test_the_archive_as_a_whole_is_bounded() -> None:
    assert archive_problem([info("a", file_size=10)], 10) is None
    many = [info(str(i)) for i in range(zips.MAX_MEMBERS + 1)]
    assert archive_problem(many, 1) == f"{zips.MAX_MEMBERS + 1} members (limit 50000)"
    huge = [info("a", file_size=zips.MAX_TOTAL_BYTES + 2**20)]
    assert archive_problem(huge, 2**40) == "2049 MiB unpacked (limit 2048 MiB)"
    assert archive_problem([info("a", file_size=2**22)], 2**10) == (
        "compressed 4096 to 1 as a whole (a zip bomb?)"
    )


def test_a_bomb_is_refused_before_a_byte_is_written(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros", b"\0" * (8 * 2**20))
    with pytest.raises(ZipRefused, match=r"^bomb\.zip: refused: compressed \d+ to 1 as a whole"):
        unpack(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
