"""The one path from a notebook to code: its `setup` and `answer` cells, in order.

`export_source` writes them as one importable module; `load` executes them as a fresh module.
Self-checks, visible tests, grading, probes and mutants all come through here, so a notebook
is read the same way everywhere. Exporting twice gives the same text; loading twice gives two
independent modules (nothing is cached in `sys.modules`).
"""

from __future__ import annotations

import itertools
import json
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbook.errors import ExportError
from workbook.modules import execute, fresh_module, registered

EXPORTED_TAGS = ("setup", "answer")
_fresh = itertools.count(1)


@dataclass(frozen=True)
class Cell:
    """A code cell that is part of the exported module."""

    index: int
    """1-based position among all the notebook's cells, as a learner counts them."""
    tag: str
    source: str

    def label(self) -> str:
        first = next((ln.strip() for ln in self.source.splitlines() if ln.strip()), "")
        if len(first) > 40:
            first = first[:37] + "..."
        return f"cell {self.index} ({self.tag}, starts {first!r})"


def read_notebook(path: str | Path) -> dict[str, Any]:
    """The notebook's JSON. Raises `ExportError` in one line if it is absent or not a notebook."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExportError(f"{path}: no such notebook") from None
    except UnicodeDecodeError as exc:
        raise ExportError(f"{path}: not a notebook (not UTF-8 text: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ExportError(
            f"{path}: not a notebook (invalid JSON at line {exc.lineno}, column {exc.colno}:"
            f" {exc.msg})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ExportError(f"{path}: not a notebook (no list of cells)")
    return data


def cell_tags(cell: dict[str, Any]) -> list[str]:
    tags = cell.get("metadata", {}).get("tags", [])
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def cell_source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def exported_cells(path: str | Path) -> list[Cell]:
    """The setup and answer cells, each checked to compile. Raises `ExportError` naming the
    notebook and the cell when there is no answer cell or a cell does not compile."""
    path = Path(path)
    cells = []
    for index, raw in enumerate(read_notebook(path)["cells"], start=1):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        tags = [t for t in cell_tags(raw) if t in EXPORTED_TAGS]
        if tags:
            cells.append(Cell(index=index, tag=tags[0], source=cell_source(raw)))
    if not any(c.tag == "answer" for c in cells):
        raise ExportError(f"{path}: no cell tagged 'answer'")
    for cell in cells:
        try:
            compile(cell.source, _filename(path, cell), "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise ExportError(
                f"{path}: {cell.label()}: {type(exc).__name__}: {exc.msg} (line {exc.lineno})"
            ) from None
        except ValueError as exc:  # e.g. a null byte in the source
            raise ExportError(f"{path}: {cell.label()}: {exc}") from None
    return cells


def export_source(path: str | Path) -> str:
    """The exported module's text: a header, then each cell under a ``# %%`` marker."""
    path = Path(path)
    parts = [
        f"# Exported from {path.name} by `python -m workbook export`.\n"
        "# Only the cells tagged `setup` and `answer`, in notebook order.\n"
    ]
    for cell in exported_cells(path):
        parts.append(f"\n# %% cell {cell.index} [{cell.tag}]\n{cell.source.rstrip()}\n")
    return "".join(parts)


def load(path: str | Path, *, name: str | None = None) -> types.ModuleType:
    """Execute the notebook's setup and answer cells as a new module and return it.

    Each call builds a fresh module (`workbook.modules`), each cell compiled on its own as a
    kernel runs it. A cell that raises becomes an `ExportError` naming the notebook and the
    cell (the original exception is its ``__cause__``).
    """
    path = Path(path).resolve()
    cells = exported_cells(path)
    module = fresh_module(name or f"notebook_{_identifier(path.stem)}_{next(_fresh)}", path)
    module.__dict__["__notebook__"] = str(path)
    with registered(module):
        for cell in cells:
            try:
                execute(module, cell.source, _filename(path, cell))
            except Exception as exc:
                raise ExportError(
                    f"{path}: {cell.label()} raised {type(exc).__name__}: {exc}"
                ) from exc
    return module


def _filename(path: Path, cell: Cell) -> str:
    return f"{path} [cell {cell.index}]"


def _identifier(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)
