"""Errors of the workbook machinery. Each message is one line that names the notebook."""

from __future__ import annotations


class WorkbookError(Exception):
    """Base of every error the machinery raises on purpose."""


class ManifestError(WorkbookError):
    """`workbook.toml` is missing, malformed, or names something that does not exist."""


class ExportError(WorkbookError):
    """A notebook cannot be exported: not JSON, no answer cells, or a cell that won't compile.

    Also raised by `load` when a setup or answer cell raises while the module is executed.
    """
