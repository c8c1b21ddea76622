"""`workbook.shared.errors`: one base for every error the machinery raises on purpose, each a
one-line message naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbook import ExportError as PublicExportError
from workbook import load
from workbook.shared.errors import ExportError, ManifestError, WorkbookError
from workbook.shared.manifest import load_manifest


def test_every_kind_is_a_workbook_error_and_not_each_other() -> None:
    """A caller can catch WorkbookError for all of them, or one kind alone."""
    assert issubclass(ManifestError, WorkbookError) and issubclass(ExportError, WorkbookError)
    assert not issubclass(ManifestError, ExportError) and not issubclass(ExportError, ManifestError)
    assert issubclass(WorkbookError, Exception)
    assert PublicExportError is ExportError  # what notebooks import is the same class


def test_a_missing_manifest_is_a_manifest_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "workbook.toml"
    with pytest.raises(ManifestError, match="no manifest here") as raised:
        load_manifest(path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_notebook_is_an_export_error_caught_as_a_workbook_error(tmp_path: Path) -> None:
    with pytest.raises(WorkbookError, match="no such notebook") as raised:
        load(tmp_path / "absent.ipynb")
    assert isinstance(raised.value, ExportError) and "\n" not in str(raised.value)
