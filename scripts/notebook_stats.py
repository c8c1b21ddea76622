"""Reading-budget counts for concept notebooks, as issue 15 defines them.

Per notebook, on the *main path* (every cell before the markdown heading ``## Going further``;
the whole notebook when it has none):

- prose words: tokens ``[A-Za-z][A-Za-z'’-]*`` in markdown cells, outside code fences and
  inline ``<svg>``;
- code lines: non-blank source lines of code cells;
- figures: ``image/png`` or ``image/svg+xml`` outputs, plus inline ``<svg>`` in markdown;
- "your turn" cells: markdown cells containing "Your turn".

It only reads notebooks, so running it twice prints the same table.

Usage (from the repo root):

    .venv/bin/python scripts/notebook_stats.py                      # every concept notebook
    .venv/bin/python scripts/notebook_stats.py notebooks/01_*.ipynb  # just these
    .venv/bin/python scripts/notebook_stats.py --before REV PATH     # PATH at git REV, then now
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
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


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def prose(markdown: str) -> str:
    """A markdown cell's text without its code fences and inline SVG."""
    return SVG.sub(" ", FENCE.sub(" ", markdown))


def stats(notebook: dict[str, Any]) -> Stats:
    """Count one parsed notebook (nbformat 4 JSON as a dict)."""
    words = code = total_code = figures = turns = longest = 0
    main = True
    for cell in notebook["cells"]:
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
            for output in cell.get("outputs", []):
                figures += any(kind in output.get("data", {}) for kind in FIGURE_TYPES)
    return Stats(words, code, total_code, figures, turns, longest)


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


def _row(name: str, s: Stats) -> str:
    return (
        f"| {name} | {s.words:,} | {s.code_lines} ({s.code_lines_total} in all) | {s.figures} "
        f"| {s.your_turn} | {s.longest_code_cell} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--before", metavar="REV", help="also count each PATH at git REV")
    args = parser.parse_args(argv)
    paths: list[Path] = args.paths or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    print(
        "| notebook | prose words (main path) | code lines (main path) | figures "
        '| "your turn" cells | longest code cell |'
    )
    print("|---|---|---|---|---|---|")
    for path in paths:
        if args.before:
            print(_row(f"{path.stem} at {args.before}", stats(_at_revision(args.before, path))))
        now = json.loads(path.read_text(encoding="utf-8"))
        print(_row(path.stem, stats(now)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
