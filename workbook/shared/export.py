"""The one path from a notebook to code: its `setup` and `answer` cells, in order.

`read_notebook` reads a notebook as Jupyter opens it: a regular file only (never through a
symlink, never a FIFO or a device, at most `MAX_FILE_BYTES`), UTF-8 with or without a BOM,
nbformat 1-3 upgraded to 4 by nbformat's own converter, and at most `MAX_GRADED_BYTES` of code
in its graded cells (stored outputs do not count). `exported_cells` compiles each setup and
answer cell on its own, as a kernel does, so a ``from __future__`` line in a cell works.

`export_source` writes them as one importable module (a cell's ``__future__`` imports also
hoisted to the top, where Python wants them); `export_tests` writes the `test` cells (the
learner's own tests) as a module of their own, never part of the plain export or of `load`;
`exported_sections` and `run_exported` take that
text apart again and run it cell by cell, each compiled alone as in the kernel. `load`
executes the cells as a fresh module. Self-checks, visible tests, grading, probes and mutants
all come through here, so a notebook is read the same way everywhere. Exporting twice gives
the same text; loading twice gives two independent modules (nothing is cached in
`sys.modules`).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import errno
import itertools
import json
import logging
import os
import re
import stat
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbook.checking.magics import readable, rewritten
from workbook.shared.errors import ExportError
from workbook.shared.modules import execute, fresh_module, parse, registered

EXPORTED_TAGS = ("setup", "answer")
TEST_TAG = "test"
#: The cells whose code is graded: their sources together may hold `MAX_GRADED_BYTES`.
GRADED_TAGS = ("setup", "answer", "test")
#: A notebook file larger than this is refused unread (stored outputs make a file large, so
#: this is generous); its graded cells may hold this much code, in UTF-8.
MAX_FILE_BYTES = 64 * 2**20
MAX_GRADED_BYTES = 16 * 2**20
#: Graded cells over this many bytes in all are compiled in a child process, bounded in time
#: and memory: a few MiB of pathological code (a comparison chain millions long) can take the
#: compiler tens of seconds and gigabytes, which the grading process must not pay.
COMPILE_HERE_BYTES = 512 * 2**10
COMPILE_SECONDS, COMPILE_MEMORY = 10.0, 2**30
_COMPILE_APART = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
for filename, source in json.loads(sys.stdin.read()):
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except BaseException as exc:
        said = {"filename": filename, "error": type(exc).__name__, "detail": str(exc)[:300]}
        print(json.dumps(said), flush=True)
        if not isinstance(exc, SyntaxError):
            break
"""
_fresh = itertools.count(1)
#: A cell's marker in the exported text: its number and tag, how many lines follow, and the
#: ``__future__`` imports moved out of its first lines to the top of the module.
_MARKER = re.compile(
    r"# %% cell (\d+) \[(\w+)\](?:, (\d+) lines?)?"
    r"(?:, hoisted: (from __future__ import \w+(?: as \w+)?(?:, \w+(?: as \w+)?)*))?"
)


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


def file_kind(mode: int) -> str:
    """What a file of `mode` is, in words: "a FIFO", "a device", "a symlink", ..."""
    kinds = (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISREG, "a file"),
    )
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def notebook_bytes(path: Path) -> bytes:
    """The file's bytes, if it is a regular file of at most `MAX_FILE_BYTES`: checked before
    it is opened (a device is never opened), then on the open descriptor (no symlink is
    followed, a FIFO cannot block), and while reading (a file that grows is cut off)."""
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        raise ExportError(f"{path}: no such notebook") from None
    except OSError as exc:
        raise ExportError(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(before.st_mode):
        raise ExportError(f"{path}: not a notebook file: it is {file_kind(before.st_mode)}")
    if before.st_size > MAX_FILE_BYTES:
        raise ExportError(
            f"{path}: {before.st_size // 2**20} MiB: too large to be a notebook"
            f" (limit {MAX_FILE_BYTES // 2**20} MiB, outputs included)"
        )
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ExportError(f"{path}: not a notebook file: it is a symlink") from None
        raise ExportError(f"{path}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise ExportError(f"{path}: not a notebook file: it changed while being read")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ExportError(f"{path}: too large to be a notebook (it grew while being read)")
    return data


def read_notebook(path: str | Path) -> dict[str, Any]:
    """The notebook's JSON as nbformat 4. Raises `ExportError` in one line if it is absent,
    not a regular file, too large, not a notebook, or its graded cells hold too much code."""
    path = Path(path)
    raw = notebook_bytes(path)
    try:
        text = raw.decode("utf-8-sig")  # a BOM, as some editors on Windows write one
    except UnicodeDecodeError as exc:
        raise ExportError(f"{path}: not a notebook (not UTF-8 text: {exc.reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportError(
            f"{path}: not a notebook (invalid JSON at line {exc.lineno}, column {exc.colno}:"
            f" {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
        raise ExportError(
            f"{path}: not a notebook (unreadable JSON: {type(exc).__name__})"
        ) from None
    if isinstance(data, dict) and type(data.get("nbformat")) is int and data["nbformat"] < 4:
        data = _upgraded(path, text, data["nbformat"])
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ExportError(f"{path}: not a notebook (no list of cells)")
    _check_graded_size(path, data["cells"])
    return data


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    # nbformat logs every schema complaint of an old notebook; the upgrade itself is the point.
    loggers = [logging.getLogger(name) for name in names]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, was in zip(loggers, before, strict=True):
            logger.disabled = was


def _upgraded(path: Path, text: str, version: int) -> dict[str, Any]:
    """An nbformat 1-3 notebook as version 4, upgraded by nbformat itself, as Jupyter does
    when it opens one (imported here only: it takes a while to import)."""
    try:
        import nbformat

        with _quiet("traitlets", "nbformat"):
            upgraded: dict[str, Any] = nbformat.reads(text, as_version=4)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ExportError(
            f"{path}: not a notebook (an nbformat {version} notebook that nbformat cannot"
            f" upgrade: {type(exc).__name__})"
        ) from None
    return upgraded


def _check_graded_size(path: Path, cells: list[Any]) -> None:
    total = 0
    for cell in cells:
        if isinstance(cell, dict) and set(cell_tags(cell)) & set(GRADED_TAGS):
            total += len(cell_source(cell).encode("utf-8", "surrogatepass"))
            if total > MAX_GRADED_BYTES:
                raise ExportError(
                    f"{path}: the setup, answer and test cells hold more than"
                    f" {MAX_GRADED_BYTES // 2**20} MiB of code: too large to grade"
                )


def cell_tags(cell: dict[str, Any]) -> list[str]:
    metadata = cell.get("metadata", {})
    tags = metadata.get("tags", []) if isinstance(metadata, dict) else []
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def cell_source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def exported_cells(path: str | Path) -> list[Cell]:
    """The setup and answer cells, each checked to compile on its own. Raises `ExportError`
    naming the notebook and the cell when there is no answer cell or a cell does not compile."""
    path = Path(path)
    cells = _tagged(path, EXPORTED_TAGS)
    if not any(c.tag == "answer" for c in cells):
        raise ExportError(f"{path}: no cell tagged 'answer'")
    return cells


def test_cells(path: str | Path) -> list[Cell]:
    """The cells tagged `test` (the learner's own tests), each checked to compile on its own;
    none is an empty list. Never part of `export_source` or `load`."""
    return _tagged(Path(path), (TEST_TAG,))


def _tagged(path: Path, wanted: tuple[str, ...]) -> list[Cell]:
    """The code cells carrying one of `wanted`, in order, each compiled alone: a cell that does
    not compile raises `ExportError` naming the notebook and the cell."""
    cells = []
    for index, raw in enumerate(read_notebook(path)["cells"], start=1):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        tags = [t for t in cell_tags(raw) if t in wanted]
        if tags:
            cells.append(Cell(index=index, tag=tags[0], source=_newlines(cell_source(raw))))
    if sum(len(c.source) for c in cells) > COMPILE_HERE_BYTES:
        cells = _proven_apart(path, cells)
    for position, cell in enumerate(cells):
        try:
            # `%time f()` as the kernel ran it, untimed; any other cell as it stands.
            cells[position] = dataclasses.replace(
                cell, source=readable(cell.source, _filename(path, cell))
            )
        except SyntaxError as exc:
            raise ExportError(
                f"{path}: {cell.label()}: {type(exc).__name__}: {exc.msg} (line {exc.lineno})"
            ) from None
        except (ValueError, RecursionError, MemoryError) as exc:  # a null byte; too nested
            raise ExportError(f"{path}: {cell.label()}: {type(exc).__name__}: {exc}") from None
    return cells


def _proven_apart(path: Path, cells: list[Cell]) -> list[Cell]:
    """`cells`, each proven to compile in a child first (`_compile_apart`), or shown there to
    be a syntax error found fast; a cell of IPython lines is given as its rewrite when that is
    proven too. So nothing compiled in this process afterwards is a cell the child has not
    bounded (a ``%time`` line must not carry a compile bomb past it)."""
    broken = _compile_apart(path, cells)
    rewrites = {
        i: dataclasses.replace(cell, source=text)
        for i, cell in enumerate(cells)
        if _filename(path, cell) in broken and (text := rewritten(cell.source)) is not None
    }
    if not rewrites:
        return cells
    still = _compile_apart(path, list(rewrites.values()))
    proven = {i: c for i, c in rewrites.items() if _filename(path, c) not in still}
    return [proven.get(i, cell) for i, cell in enumerate(cells)]


def _compile_apart(path: Path, cells: list[Cell]) -> set[str]:
    """Compile `cells` in a child interpreter first, within `COMPILE_SECONDS` and
    `COMPILE_MEMORY`: `ExportError` when one does not compile there for any reason but a
    syntax error, or the child runs out; else the file names of the cells with a syntax error
    (found fast: compiled here again, for the message the kernel would give)."""
    import subprocess
    import sys

    script = _COMPILE_APART.replace("MEMORY", str(COMPILE_MEMORY))
    sources = json.dumps([[_filename(path, c), c.source] for c in cells])
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", script],
            input=sources,
            capture_output=True,
            text=True,
            timeout=COMPILE_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ExportError(
            f"{path}: the graded cells did not compile within {COMPILE_SECONDS:g} s"
        ) from None
    said = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    syntax = {f["filename"] for f in said if f["error"] == "SyntaxError"}
    fatal = [f for f in said if f["error"] != "SyntaxError"]
    if fatal:
        cell = next(c for c in cells if _filename(path, c) == fatal[0]["filename"])
        detail = fatal[0]["detail"] or f"more than {COMPILE_MEMORY // 2**20} MiB to compile"
        raise ExportError(f"{path}: {cell.label()}: {fatal[0]['error']}: {detail}")
    if done.returncode != 0:  # it died before it could say which cell
        raise ExportError(f"{path}: the graded cells could not be compiled (out of memory?)")
    return syntax


def _newlines(source: str) -> str:
    # Python reads \r\n and \r as \n anyway; one kind of line end keeps line counts exact.
    return source.replace("\r\n", "\n").replace("\r", "\n")


def _futures(source: str) -> tuple[list[ast.ImportFrom], str]:
    """The cell's leading ``from __future__`` imports, and its text with each replaced by
    ``(None)`` spread over the same lines (so every other line keeps its number)."""
    tree = parse(source)
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring may come first
    found = []
    for node in body:
        if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            break
        found.append(node)
    if not found:
        return [], source
    lines = source.split("\n")
    for node in reversed(found):  # from the end, so earlier positions stay valid
        assert node.end_lineno is not None and node.end_col_offset is not None
        first, last = node.lineno - 1, node.end_lineno - 1
        head = lines[first].encode()[: node.col_offset].decode()
        tail = lines[last].encode()[node.end_col_offset :].decode()
        if last == first:
            lines[first] = head + "(None)" + tail
        else:  # a parenthesised import over several lines: the same lines, now blank
            lines[first : last + 1] = [head + "(None", *[""] * (last - first - 1), ")" + tail]
    return found, "\n".join(lines)


def _future_line(nodes: list[ast.ImportFrom]) -> str:
    names: dict[tuple[str, str | None], None] = {}
    for node in nodes:
        names.update(dict.fromkeys((a.name, a.asname) for a in node.names))
    aliases = [ast.alias(name, asname) for name, asname in names]
    return ast.unparse(ast.ImportFrom("__future__", aliases, 0))


def export_source(path: str | Path) -> str:
    """The exported module's text: a header, then each cell under a ``# %%`` marker that
    gives its number, tag and line count. A cell's ``from __future__`` imports are hoisted:
    replaced in place by ``(None)``, named in its marker, and gathered at the top."""
    path = Path(path)
    header = (
        f"# Exported from {_shown_name(path)} by `python -m workbook export`.\n"
        "# Only the cells tagged `setup` and `answer`, in notebook order.\n"
    )
    return _module_text(exported_cells(path), header, "")


def export_tests(path: str | Path) -> str:
    """The notebook's `test` cells as one module (``python -m workbook export NB --tests``).

    The module takes every seam from the module named ``submission`` (``from submission
    import *``, its first statement): whoever runs it registers the answers under that name
    first, as the grader's worker does with the code under test, or writes the plain export
    to ``submission.py`` beside it (then ``pytest`` runs the tests). Exporting twice gives the
    same text. Raises `ExportError` when there is no test cell or one does not compile."""
    path = Path(path)
    cells = test_cells(path)
    if not cells:
        raise ExportError(f"{path}: no cell tagged 'test'")
    header = (
        f"# Exported from {_shown_name(path)} by `python -m workbook export --tests`.\n"
        "# Only the cells tagged `test`, in notebook order; the code they test comes from\n"
        "# the answers module named `submission` (register it, or export it beside this).\n"
    )
    return _module_text(cells, header, TESTS_PREAMBLE)


#: The first statement of `export_tests`'s module: every public name of the answers.
TESTS_PREAMBLE = "from submission import *  # noqa: F403  (the code under test)\n"


def _shown_name(path: Path) -> str:
    # A file name with a line break in it must not end the comment and start code.
    return path.name if path.name.isprintable() else ascii(path.name)


def _module_text(cells: list[Cell], header: str, preamble: str) -> str:
    parts = []
    hoisted: list[ast.ImportFrom] = []
    for cell in cells:
        futures, body = _futures(cell.source)
        body = body.rstrip()
        count = body.count("\n") + 1
        marker = f"# %% cell {cell.index} [{cell.tag}], {count} line{'s' * (count != 1)}"
        if futures:
            marker += f", hoisted: {_future_line(futures)}"
            hoisted += futures
        parts.append(f"\n{marker}\n{body}\n")
    if hoisted:
        header += (
            "# A module takes __future__ imports first: hoisted here from the cells below.\n"
            f"{_future_line(hoisted)}\n"
        )
    return header + preamble + "".join(parts)


def exported_sections(text: str) -> list[str]:
    """The cells of `export_source`'s text, each as source to compile on its own, as the
    kernel runs it: padded with blank lines so that its line numbers are the module's, its
    own ``__future__`` imports back on its marker's line. Text not in that form (hand-written,
    a marker without a line count) comes back whole, as one section."""
    lines = _newlines(text).split("\n")
    sections = []
    index = 0
    outside = []
    while index < len(lines):
        match = _MARKER.fullmatch(lines[index])
        if match is None:
            outside.append(lines[index])
            index += 1
            continue
        if match[3] is None:
            return [text]
        count = int(match[3])
        body = lines[index + 1 : index + 1 + count]
        if len(body) < count:
            return [text]
        sections.append("\n" * index + (match[4] or "") + "\n" + "\n".join(body) + "\n")
        index += 1 + count
    future = re.compile(r"from __future__ import [\w, ]+")
    if not sections or any(
        ln.strip() and not ln.startswith("#") and not future.fullmatch(ln) for ln in outside
    ):
        return [text]
    return sections


def run_exported(module: types.ModuleType, text: str, filename: str) -> None:
    """Run exported text in `module` the way the kernel ran the cells: each section of
    `exported_sections` compiled on its own (`workbook.shared.modules.execute`), in order, under
    `filename` with the module's line numbers. Exceptions propagate unchanged."""
    for source in exported_sections(text):
        execute(module, source, filename)


def load(path: str | Path, *, name: str | None = None) -> types.ModuleType:
    """Execute the notebook's setup and answer cells as a new module and return it.

    Each call builds a fresh module (`workbook.shared.modules`), each cell compiled on its own as a
    kernel runs it. A cell that raises becomes an `ExportError` naming the notebook and the
    cell (the original exception is its ``__cause__``).
    """
    # Absolute, but a symlink stays one: the reader refuses it as it does everywhere.
    path = Path(os.path.abspath(path))
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
