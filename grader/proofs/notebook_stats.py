"""Reading-budget counts for concept notebooks, and the bars `make check` holds them to.

Per notebook, on the *main path* (every cell before the markdown heading ``## Going further``;
the whole notebook when it has none):

- prose words: tokens ``[A-Za-z][A-Za-z'’-]*`` in markdown cells, outside code fences and
  inline ``<svg>``;
- code lines: non-blank source lines of code cells;
- figures: ``image/png`` or ``image/svg+xml`` outputs, plus inline ``<svg>`` in markdown;
- "your turn" cells: markdown cells containing "Your turn";
- the longest silent stretch: non-blank, non-comment lines of consecutive code cells (markdown
  between them ignored), up to and including the first code cell with an output, the longest
  such run on the main path (what a learner reads and runs before seeing any result);
- figures without words: in the whole notebook, figure outputs whose cell is not followed by a
  one-line markdown cell starting ``Figure:`` (what a screen reader would read); an explorer
  (a cell tagged ``explorer``) carries its own line, recomputed as its controls move;
- run time: seconds from kernel start to the last cell under nbval, when nbval ran them.

``--check`` exits 1, naming each, when a notebook misses ARC's bars: at most 3,500 words (06:
3,000), at least 3 figures and 3 "your turn" cells, no silent stretch over 25 lines, every
figure described, under 15 s a notebook. `make check` holds the bars in its nbval part, which
loads this module as a pytest plugin (``-p grader.proofs.notebook_stats``): one run of the
notebooks gives both the verdict on their outputs and their run times.

Without nbval it only reads notebooks, so running it twice prints the same table.

Usage (from the repo root):

    .venv/bin/python scripts/notebook_stats.py                      # every concept notebook
    .venv/bin/python scripts/notebook_stats.py notebooks/01_*.ipynb  # just these
    .venv/bin/python scripts/notebook_stats.py --before REV PATH     # PATH at git REV, then now
    .venv/bin/python -m pytest --nbval notebooks -p grader.proofs.notebook_stats  # with times
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from workbook.shared.manifest import repo_root

ROOT = repo_root()
WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL | re.IGNORECASE)
GOING_FURTHER = re.compile(r"^## Going further\b", re.MULTILINE)
FIGURE_TYPES = ("image/png", "image/svg+xml")


@dataclass(frozen=True)
class Stats:
    """The counts of one notebook's main path (and its code lines in all)."""

    words: int
    code_lines: int
    code_lines_total: int
    figures: int
    your_turn: int
    longest_code_cell: int
    longest_silent: int = 0
    undescribed: int = 0
    """Figure outputs with no ``Figure:`` line after them (the whole notebook)."""
    seconds: float | None = None
    """Run time under nbval, when it ran; None when only the file was read."""


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def prose(markdown: str) -> str:
    """A markdown cell's text without its code fences and inline SVG."""
    return SVG.sub(" ", FENCE.sub(" ", markdown))


def _figures(cell: dict[str, Any]) -> int:
    return sum(
        any(kind in output.get("data", {}) for kind in FIGURE_TYPES)
        for output in cell.get("outputs", [])
    )


def _described(cell: dict[str, Any], following: dict[str, Any] | None) -> bool:
    """A figure cell is described by the one-line ``Figure:`` markdown cell after it, or is an
    explorer, whose line moves with its controls."""
    if "explorer" in cell.get("metadata", {}).get("tags", []):
        return True
    if following is None or following["cell_type"] != "markdown":
        return False
    text = _source(following).strip()
    return text.startswith(ALT_PREFIX) and "\n" not in text


#: How the line under a figure begins.
ALT_PREFIX = "Figure: "


def stats(notebook: dict[str, Any], seconds: float | None = None) -> Stats:
    """Count one parsed notebook (nbformat 4 JSON as a dict); `seconds`: its run time."""
    words = code = total_code = figures = turns = longest = silent = stretch = 0
    cells = notebook["cells"]
    undescribed = sum(
        _figures(cell)
        for at, cell in enumerate(cells)
        if _figures(cell) and not _described(cell, cells[at + 1] if at + 1 < len(cells) else None)
    )
    main = True
    for cell in cells:
        text = _source(cell)
        if cell["cell_type"] == "markdown" and GOING_FURTHER.search(text):
            main = False
        lines = sum(1 for line in text.splitlines() if line.strip())
        if cell["cell_type"] == "code":
            total_code += lines
        if not main:
            continue
        if cell["cell_type"] == "markdown":
            words += len(WORD.findall(prose(text)))
            figures += len(SVG.findall(text))
            turns += "Your turn" in text
        elif cell["cell_type"] == "code":
            code += lines
            longest = max(longest, lines)
            figures += _figures(cell)
            stretch += sum(1 for line in text.splitlines() if line.strip() and not _comment(line))
            silent = max(silent, stretch)
            if cell.get("outputs"):
                stretch = 0
    return Stats(words, code, total_code, figures, turns, longest, silent, undescribed, seconds)


def _comment(line: str) -> bool:
    return line.lstrip().startswith("#")


#: ARC's bars for a concept notebook: words at most (06's own), figures and "your turn" cells at
#: least, silent stretch at most, seconds to run at most.
MAX_WORDS, MAX_WORDS_06, MIN_FIGURES, MIN_TURNS, MAX_SILENT = 3_500, 3_000, 3, 3, 25
MAX_SECONDS = 15.0


def problems(name: str, s: Stats) -> list[str]:
    """What `s` misses of ARC's bars, one line each (empty: every bar met)."""
    cap = MAX_WORDS_06 if name.startswith("06") else MAX_WORDS
    found = []
    if s.words > cap:
        found.append(f"{name}: {s.words:,} main-path words, over {cap:,}")
    if s.figures < MIN_FIGURES:
        found.append(f"{name}: {s.figures} figures, under {MIN_FIGURES}")
    if s.your_turn < MIN_TURNS:
        found.append(f'{name}: {s.your_turn} "your turn" cells, under {MIN_TURNS}')
    if s.longest_silent > MAX_SILENT:
        found.append(
            f"{name}: {s.longest_silent} lines of code before an output, over {MAX_SILENT}"
        )
    if s.undescribed:
        found.append(
            f"{name}: {s.undescribed} figure(s) not followed by a one-line '{ALT_PREFIX}...'"
            " markdown cell saying what it shows"
        )
    if s.seconds is not None and s.seconds > MAX_SECONDS:
        found.append(f"{name}: ran in {s.seconds:.1f} s, over {MAX_SECONDS:.0f} s")
    return found


def _at_revision(revision: str, path: Path) -> dict[str, Any]:
    relative = path.resolve().relative_to(ROOT).as_posix()
    shown = subprocess.run(
        ["git", "show", f"{revision}:{relative}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(shown.stdout)
    return loaded


HEADER = (
    "| notebook | prose words (main path) | code lines (main path) | figures "
    '| "your turn" cells | longest code cell | longest silent stretch | figures undescribed '
    "| run time |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def _row(name: str, s: Stats) -> str:
    ran = "-" if s.seconds is None else f"{s.seconds:.1f} s"
    return (
        f"| {name} | {s.words:,} | {s.code_lines} ({s.code_lines_total} in all) | {s.figures} "
        f"| {s.your_turn} | {s.longest_code_cell} | {s.longest_silent} | {s.undescribed} "
        f"| {ran} |"
    )


def report(times: dict[Path, float]) -> tuple[list[str], list[str]]:
    """The table's rows and the bars missed, for each notebook timed (sorted by path)."""
    rows, missed = [], []
    for path in sorted(times):
        now = stats(json.loads(path.read_text(encoding="utf-8")), times[path])
        rows.append(_row(path.stem, now))
        missed += problems(path.stem, now)
    return rows, missed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--before", metavar="REV", help="also count each PATH at git REV")
    parser.add_argument("--check", action="store_true", help="exit 1 when a bar of ARC is missed")
    args = parser.parse_args(argv)
    paths: list[Path] = args.paths or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    print(HEADER)
    missed: list[str] = []
    for path in paths:
        if args.before:
            print(_row(f"{path.stem} at {args.before}", stats(_at_revision(args.before, path))))
        now = stats(json.loads(path.read_text(encoding="utf-8")))
        print(_row(path.stem, now))
        missed += problems(path.stem, now)
    if args.check and missed:
        print("\n".join(["", "Over ARC's bars:", *missed]))
        return 1
    return 0


# ─────────────────────────────────────────── as a pytest plugin beside nbval: run times and bars

#: Seconds per notebook under nbval: every phase of every cell's item (setup starts the kernel).
_TIMES: defaultdict[Path, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = Path(report.fspath)
    if path.suffix == ".ipynb":
        _TIMES[path.resolve()] += report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After nbval: print the table with run times, and fail the run over a bar."""
    rows, missed = report(dict(_TIMES))
    if not rows:
        return
    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    write = terminal.write_line if terminal is not None else print
    for line in ["", "Reading budgets (grader.proofs.notebook_stats):", HEADER, *rows]:
        write(line)
    if missed:
        for line in ["", "Over ARC's bars:", *missed]:
            write(line)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


if __name__ == "__main__":
    sys.exit(main())
