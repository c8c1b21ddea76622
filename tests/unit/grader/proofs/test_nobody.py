"""Acting as nobody: what others can reach, an interpreter nobody can run, why nobody cannot be
acted as, staging a copy nobody can read (hard links where the file is readable already), and
commands really run as nobody (as root only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.proofs import nobody
from grader.proofs.nobody import AS_NOBODY, NOBODY, interpreter, reachable, skip_reason, stage

AS_ROOT_ONLY = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder others can reach (pytest's own temp folders are the owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="rit-nobody-test-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def tree(folder: Path) -> list[tuple[str, int]]:
    """Every entry under `folder`: its path and permission bits."""
    return sorted(
        (str(p.relative_to(folder)), p.lstat().st_mode & 0o777) for p in folder.rglob("*")
    )


# ── reachable ───────────────────────────────────────────────────────────────────────────


def test_reachable_needs_every_folder_searchable_and_the_file_readable(open_folder: Path) -> None:
    readable = open_folder / "readable.txt"
    readable.write_text("x")
    readable.chmod(0o644)
    private = open_folder / "private.txt"
    private.write_text("x")
    private.chmod(0o600)
    passage = open_folder / "passage"
    passage.mkdir(mode=0o711)
    (passage / "inside.txt").write_text("x")
    (passage / "inside.txt").chmod(0o644)
    closed = open_folder / "closed"
    closed.mkdir(mode=0o700)
    (closed / "inside.txt").write_text("x")
    (closed / "inside.txt").chmod(0o644)
    assert reachable(open_folder) and reachable(readable)
    assert not reachable(private)
    assert reachable(passage / "inside.txt")  # searchable is enough on the way
    assert not reachable(passage)  # a folder must also be readable
    assert not reachable(closed) and not reachable(closed / "inside.txt")


def test_nothing_in_a_folder_of_the_owners_alone_is_reachable(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "file.txt").chmod(0o644)
    assert not reachable(tmp_path / "file.txt")
    assert not reachable(tmp_path / "missing.txt")


# ── an interpreter, and why nobody cannot be acted as ───────────────────────────────────


def test_interpreter_is_one_of_this_version_that_others_can_run() -> None:
    found = interpreter()
    if found is None:
        pytest.skip("no interpreter others can run here")
    assert reachable(Path(found)) and os.stat(found).st_mode & 0o001
    said = subprocess.run(
        [found, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert said.strip() == str(sys.version_info[:2])


def test_no_interpreter_when_none_is_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nobody, "reachable", lambda path: False)
    assert interpreter() is None
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert skip_reason() == f"no python{version} nobody can run"


def test_skip_reasons_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nobody, "interpreter", lambda: "/usr/bin/python3")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert skip_reason() == "not root"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert skip_reason() == "setpriv is missing"
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    assert skip_reason() is None


# ── staging ─────────────────────────────────────────────────────────────────────────────


def make_source(tmp_path: Path) -> Path:
    """A repository only its owner can reach: a file readable by others, a private one, a
    symlink, a left-out folder and a ``__pycache__``."""
    source = tmp_path / "repo"
    (source / "pkg" / "__pycache__").mkdir(parents=True)
    (source / "pkg" / "__init__.py").write_text("X = 1\n")
    (source / "pkg" / "__init__.py").chmod(0o644)
    (source / "pkg" / "secret.py").write_text("Y = 2\n")
    (source / "pkg" / "secret.py").chmod(0o600)
    (source / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (source / "pkg" / "link.py").symlink_to("__init__.py")
    (source / ".git").mkdir()
    (source / ".git" / "HEAD").write_text("ref\n")
    (source / "pkg" / ".git").mkdir()  # left out at the top level only
    source.chmod(0o700)
    return source


def test_a_reachable_source_is_used_as_it_is(open_folder: Path, tmp_path: Path) -> None:
    assert stage(open_folder, tmp_path / "staged") == open_folder
    assert not (tmp_path / "staged").exists()


def test_staging_copies_what_nobody_cannot_reach_leaving_out_what_was_asked(
    tmp_path: Path, open_folder: Path
) -> None:
    source = make_source(tmp_path)
    copy = stage(source, open_folder / "staged", left_out=(".git",))
    assert copy == open_folder / "staged" / "repo"
    assert [name for name, _ in tree(copy)] == [
        "pkg",
        "pkg/.git",
        "pkg/__init__.py",
        "pkg/link.py",
        "pkg/secret.py",
    ]
    assert (copy / "pkg" / "link.py").is_symlink()
    assert all(os.stat(here).st_mode & 0o777 == 0o755 for here in (copy, copy / "pkg"))
    assert reachable(copy / "pkg" / "__init__.py") and reachable(copy / "pkg" / "secret.py")
    # Readable by others already: the same file (a hard link); private: a copy, the original
    # left as it was.
    assert (copy / "pkg" / "__init__.py").samefile(source / "pkg" / "__init__.py")
    assert not (copy / "pkg" / "secret.py").samefile(source / "pkg" / "secret.py")
    assert (source / "pkg" / "secret.py").stat().st_mode & 0o777 == 0o600
    assert (copy / "pkg" / "secret.py").read_text() == "Y = 2\n"


def test_staging_twice_gives_the_same_tree(tmp_path: Path, open_folder: Path) -> None:
    source = make_source(tmp_path)
    first = stage(source, open_folder / "one", left_out=(".git",))
    second = stage(source, open_folder / "two", left_out=(".git",))
    assert tree(first) == tree(second)


def test_staging_one_file(tmp_path: Path, open_folder: Path) -> None:
    source = tmp_path / "python3"
    source.write_text("#!")
    source.chmod(0o755)
    copy = stage(source, open_folder / "bin")
    assert copy == open_folder / "bin" / "python3"
    assert reachable(copy) and copy.samefile(source)


# ── as nobody, for real ─────────────────────────────────────────────────────────────────


def as_nobody(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AS_NOBODY, *command],
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


@AS_ROOT_ONLY
def test_a_command_runs_as_nobody_with_no_groups(open_folder: Path) -> None:
    python = interpreter()
    assert python is not None
    code = "import os; print(os.getuid(), os.getgid(), os.getgroups())"
    done = as_nobody(python, "-c", code, cwd=open_folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=2) == [str(NOBODY), str(NOBODY), "[]\n"]


@AS_ROOT_ONLY
def test_nobody_imports_the_staged_copy_but_cannot_read_the_original(
    tmp_path: Path, open_folder: Path
) -> None:
    python = interpreter()
    assert python is not None
    source = make_source(tmp_path)
    copy = stage(source, open_folder / "staged", left_out=(".git",))
    code = "import sys; sys.path.insert(0, sys.argv[1]); import pkg.secret as s; print(s.Y)"
    staged = as_nobody(python, "-c", code, str(copy), cwd=open_folder)
    assert (staged.returncode, staged.stdout) == (0, "2\n"), staged.stderr
    original = as_nobody(python, "-c", code, str(source), cwd=open_folder)
    assert original.returncode != 0
    assert "ModuleNotFoundError" in original.stderr or "PermissionError" in original.stderr
