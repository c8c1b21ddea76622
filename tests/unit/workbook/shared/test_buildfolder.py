"""`workbook.shared.buildfolder`: a build's folder and modules by number, and which of the files
under ``builds/`` ship to learners and which stay secret."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT
from workbook.checks import Checks
from workbook.shared import buildfolder


def lay_out(root: Path, files: list[str]) -> None:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x", encoding="utf-8")


def test_folders_by_number_under_a_root(tmp_path: Path) -> None:
    assert buildfolder.folder("03", tmp_path) == tmp_path / "builds" / "build03"
    assert buildfolder.hidden("05", tmp_path) == tmp_path / "builds" / "build05" / "hidden"
    assert buildfolder.folder("03") == ROOT / "builds" / "build03"  # this repository by default


def test_shipped_and_secret_split_the_builds_folder(tmp_path: Path) -> None:
    """Shipped: the packages' ``__init__.py``, each ``build.toml`` and ``visible/``; secret: the
    rest. Caches and checkpoints are neither."""
    lay_out(
        tmp_path,
        [
            "builds/__init__.py",
            "builds/README.md",
            "builds/build03/__init__.py",
            "builds/build03/build.toml",
            "builds/build03/visible/answer_checks.py",
            "builds/build03/visible/__pycache__/answer_checks.cpython-311.pyc",
            "builds/build03/hidden/test_hidden.py",
            "builds/build03/hidden/.ipynb_checkpoints/x.py",
            "builds/build05/build.toml",
        ],
    )

    def names(paths: list[Path]) -> list[str]:
        return [str(p.relative_to(tmp_path / "builds")) for p in paths]

    assert names(buildfolder.shipped(tmp_path)) == [
        "__init__.py",
        "build03/__init__.py",
        "build03/build.toml",
        "build03/visible/answer_checks.py",
        "build05/build.toml",
    ]
    assert names(buildfolder.secret(tmp_path)) == ["README.md", "build03/hidden/test_hidden.py"]
    assert buildfolder.hidden_folders(tmp_path) == [tmp_path / "builds/build03/hidden"]


def test_an_empty_builds_folder_ships_nothing(tmp_path: Path) -> None:
    (tmp_path / "builds").mkdir()
    assert buildfolder.shipped(tmp_path) == buildfolder.secret(tmp_path) == []
    assert buildfolder.hidden_folders(tmp_path) == []


def test_build_03_has_visible_checks_and_test_writing_steps() -> None:
    """The same module on a repeat; a build number with no folder has neither."""
    checks = buildfolder.answer_checks("03")
    assert isinstance(checks, Checks) and len(checks) > 0
    assert buildfolder.visible("03", "answer_checks") is buildfolder.visible("03", "answer_checks")
    assert buildfolder.has_answer_checks("03") and buildfolder.has_written_tests("03")
    assert hasattr(buildfolder.written_tests("03"), "LEARNER_TESTS")
    assert not buildfolder.has_answer_checks("99") and not buildfolder.has_written_tests("99")
