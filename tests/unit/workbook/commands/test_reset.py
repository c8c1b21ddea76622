"""`make reset BUILD=NN` (`workbook.commands.reset`): a build back to its pristine stubs, the
learner's own version kept in ``exercises/.backups/`` first; a clear line and exit 2 otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workbook.commands import reset
from workbook.shared.errors import ManifestError
from workbook.shared.manifest import Manifest, copy_manifest, load_manifest

NOTEBOOK = "exercises/03_build_retry_and_sink.ipynb"


@pytest.fixture
def learner_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Manifest:
    """A learner copy in `tmp_path`: the manifest, build 03 as the learner left it (a solution),
    and the pristine stubs under ``.pristine/``; `reset` reads this manifest."""
    manifest = load_manifest(copy_manifest(ROOT, tmp_path))
    (tmp_path / reset.PRISTINE / "exercises").mkdir(parents=True)
    shutil.copy(ROOT / NOTEBOOK, tmp_path / reset.PRISTINE / NOTEBOOK)
    (tmp_path / "exercises").mkdir()
    shutil.copy(ROOT / "solutions" / Path(NOTEBOOK).name, tmp_path / NOTEBOOK)
    monkeypatch.setattr(reset, "load_manifest", lambda: manifest)
    return manifest


def test_reset_keeps_a_backup_then_restores_the_stubs(
    learner_copy: Manifest, capsys: pytest.CaptureFixture[str]
) -> None:
    """``BUILD=3`` means 03; the learner's bytes survive in the backup."""
    mine = (learner_copy.root / NOTEBOOK).read_bytes()
    assert reset.reset("3") == 0
    assert (learner_copy.root / NOTEBOOK).read_bytes() == (ROOT / NOTEBOOK).read_bytes()
    (backup,) = (learner_copy.root / "exercises" / ".backups").iterdir()
    assert backup.read_bytes() == mine
    assert capsys.readouterr().out == (
        f"Your version is kept in exercises/.backups/{backup.name}.\n"
        f"{NOTEBOOK} is back to its stubs.\n"
    )


def test_two_resets_at_once_keep_two_backups(learner_copy: Manifest) -> None:
    """Within the same second, the second backup gets its own name, never overwriting."""
    assert reset.reset("03") == 0
    assert reset.reset("03") == 0
    backups = sorted(p.name for p in (learner_copy.root / "exercises" / ".backups").iterdir())
    assert len(backups) == 2 and len(set(backups)) == 2
    assert (learner_copy.root / NOTEBOOK).read_bytes() == (ROOT / NOTEBOOK).read_bytes()


def test_a_deleted_notebook_is_restored_without_a_backup(
    learner_copy: Manifest, capsys: pytest.CaptureFixture[str]
) -> None:
    (learner_copy.root / NOTEBOOK).unlink()
    assert reset.reset("03") == 0
    assert (learner_copy.root / NOTEBOOK).exists()
    assert not (learner_copy.root / "exercises" / ".backups").exists()
    assert capsys.readouterr().out == f"{NOTEBOOK} is back to its stubs.\n"


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (None, "Say which build to reset, e.g. `make reset BUILD=03` (one of 03, 05, 07, 08)."),
        ("", "Say which build to reset"),
        ("01", "01 is a concept notebook: there is nothing of yours to reset."),
        ("05", "No pristine copy of exercises/05_build_paginated_source.ipynb here (.pristine/"),
    ],
)
def test_nothing_to_reset_is_one_line_and_exit_2(
    build: str | None, said: str, learner_copy: Manifest, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (learner_copy.root / NOTEBOOK).read_bytes()
    assert reset.reset(build) == 2
    out = capsys.readouterr().out
    assert out.startswith(said) and out.count("\n") == 1
    assert (learner_copy.root / NOTEBOOK).read_bytes() == before


def test_an_unknown_build_is_a_manifest_error_naming_the_numbers(learner_copy: Manifest) -> None:
    with pytest.raises(ManifestError, match=r"no notebook '42' in the manifest \(it has 01,"):
        reset.reset("42")
