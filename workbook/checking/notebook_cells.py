"""A build notebook's cells as the learner sees them: the name JupyterLab shows for a cell
(its step heading, its first definition), and which names an answer cell uses that only an
untagged cell defines (a helper the grader will never see). Pure functions of the cells:
asking twice gives the same answer.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from workbook.shared.export import cell_source, cell_tags
from workbook.shared.modules import parse

# ───────────────────────────────────────────────── cells as JupyterLab shows them

_HEADING = re.compile(r"^(#{1,2})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _heading_above(cells: Sequence[Any], index: int) -> tuple[int, str] | None:
    """(position, short text) of the nearest ``#``/``##`` heading above cell `index`."""
    for above in range(index - 1, 0, -1):
        found = _HEADING.findall(cell_source(cells[above - 1]))
        if found and cells[above - 1].get("cell_type") == "markdown":
            text = found[-1][1].replace("`", "").strip()
            head, colon, _ = text.partition(":")
            return above, head.strip() if colon and head.strip() else text
    return None


def _is_heading(cell: Any) -> bool:
    return cell.get("cell_type") == "markdown" and bool(_HEADING.search(cell_source(cell)))


def step_heading(cells: Sequence[Any], index: int) -> str | None:
    """The short form of the nearest ``#``/``##`` heading above cell `index` (1-based, every
    cell counted): ``Step 3`` for ``## Step 3: `IdempotentSink```; None above the first one."""
    found = _heading_above(cells, index)
    return found[1] if found else None


def cell_name(cells: Sequence[Any], index: int) -> str:
    """Cell `index` (1-based, every cell counted as the learner counts them) as a learner
    finds it in JupyterLab: ``the setup cell``, ``the answer cell under 'Step 3'`` (the only
    one of its tag below that heading), else ``the code cell under 'Step 3' that starts
    `class FailsOnce(MemorySink):` (cell 24)``."""
    cell = cells[index - 1]
    tag = next((t for t in cell_tags(cell) if t in ("setup", "answer", "test")), "")
    heading = _heading_above(cells, index)
    start, under = (heading[0], f" under '{heading[1]}'") if heading else (0, "")
    if tag == "setup" and sum("setup" in cell_tags(c) for c in cells) == 1:
        return "the setup cell"
    if tag and heading:
        section = range(start + 1, len(cells) + 1)
        end = next((i for i in section if i > index and _is_heading(cells[i - 1])), None)
        same = [i for i in section if (end is None or i < end) and tag in cell_tags(cells[i - 1])]
        if same == [index]:
            return f"the {tag} cell{under}"
    first = next((ln.strip() for ln in cell_source(cell).splitlines() if ln.strip()), "")
    first = first if len(first) <= 40 else first[:37] + "..."
    starts = f" that starts `{first}`" if first else ""
    return f"the {tag + ' ' if tag else ''}code cell{under}{starts} (cell {index})"


# ───────────────────────────────────────────────── helpers left in untagged cells


def _symbols(source: str) -> symtable.SymbolTable | None:
    try:
        return symtable.symtable(source, "<cell>", "exec")
    except (SyntaxError, ValueError):
        return None


def _binds(symbol: symtable.Symbol) -> bool:
    return symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()


def _bound(source: str) -> set[str]:
    """Names `source` binds at its top level (defs, classes, assignments, imports)."""
    table = _symbols(source)
    return {s.get_name() for s in table.get_symbols() if _binds(s)} if table else set()


def _globals_used(source: str) -> set[str]:
    """Global names `source` reads, at its top level or inside any function or class."""
    top = _symbols(source)
    used: set[str] = set()
    tables = [top] if top else []
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for s in table.get_symbols():
            free = not _binds(s) if table is top else s.is_global()
            if s.is_referenced() and free:
                used.add(s.get_name())
    return used


def _imported(source: str) -> set[str]:
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {
        (alias.asname or alias.name).split(".")[0]
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


def untagged_helpers(
    cells: Sequence[Any], tagged: Iterable[str], kernel: Mapping[str, Any] | None = None
) -> list[str]:
    """A line for each name the tagged sources use but never define that an untagged code
    cell of the notebook (or, given `kernel`, this kernel's globals) does define: in the
    kernel it works, at grading it is a NameError."""
    sources = list(tagged)
    defined = set().union(*map(_bound, sources)) | set(dir(builtins)) | {"__notebook__"}
    lines = []
    for name in sorted(set().union(*map(_globals_used, sources)) - defined):
        where = [
            i
            for i, cell in enumerate(cells, 1)
            if isinstance(cell, dict)
            and cell.get("cell_type") == "code"
            and not {"setup", "answer"} & set(cell_tags(cell))
            and name in _bound(cell_source(cell))
        ]
        if where:
            place = cell_name(cells, where[0])
            if name in _imported(cell_source(cells[where[0] - 1])):
                lines.append(
                    f"`{name}` is imported only in an untagged cell, {place}: import it in"
                    " your answer cell too"
                )
            else:
                lines.append(f"`{name}` is defined in an untagged cell, {place}: tag it `answer`")
        elif kernel is not None and name in kernel:
            lines.append(
                f"`{name}` is defined in this kernel, but in no setup or answer cell of the saved"
                " notebook: tag the cell that defines it `answer`, and save"
            )
    return lines
