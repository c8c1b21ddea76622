"""Reading-budget counts for concept notebooks, as issue 15 defines them.

Per notebook, on the *main path* (every cell before the markdown heading ``## Going further``;
the whole notebook when it has none):

- prose words: tokens ``[A-Za-z][A-Za-z'’-]*`` in markdown cells, outside code fences and
  inline ``<svg>``;
- code lines: non-blank source lines of code cells;
- figures: ``image/png`` or ``image/svg+xml`` outputs, plus inline ``<svg>`` in markdown;
- "your turn" cells: markdown cells containing "Your turn";
- the longest silent stretch: non-blank, non-comment lines of consecutive code cells (markdown
  between them ignored), up to and including the first code cell with an output, the longest
  such run on the main path (what a learner reads and runs before seeing any result).

``--check`` exits 1, naming each, when a notebook misses ARC's bars: at most 3,500 words (06:
3,000), at least 3 figures and 3 "your turn" cells, no silent stretch over 25 lines.

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
    longest_silent: int = 0


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def prose(markdown: str) -> str:
    """A markdown cell's text without its code fences and inline SVG."""
    return SVG.sub(" ", FENCE.sub(" ", markdown))


def stats(notebook: dict[str, Any]) -> Stats:
    """Count one parsed notebook (nbformat 4 JSON as a dict)."""
    words = code = total_code = figures = turns = longest = silent = stretch = 0
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
            stretch += sum(1 for line in text.splitlines() if line.strip() and not _comment(line))
            silent = max(silent, stretch)
            if cell.get("outputs"):
                stretch = 0
    return Stats(words, code, total_code, figures, turns, longest, silent)


def _comment(line: str) -> bool:
    return line.lstrip().startswith("#")


#: ARC's bars for a concept notebook (issue 28): words at most (06's own), figures and "your
#: turn" cells at least, silent stretch at most.
MAX_WORDS, MAX_WORDS_06, MIN_FIGURES, MIN_TURNS, MAX_SILENT = 3_500, 3_000, 3, 3, 25


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


def _row(name: str, s: Stats) -> str:
    return (
        f"| {name} | {s.words:,} | {s.code_lines} ({s.code_lines_total} in all) | {s.figures} "
        f"| {s.your_turn} | {s.longest_code_cell} | {s.longest_silent} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--before", metavar="REV", help="also count each PATH at git REV")
    parser.add_argument("--check", action="store_true", help="exit 1 when a bar of ARC is missed")
    args = parser.parse_args(argv)
    paths: list[Path] = args.paths or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    print(
        "| notebook | prose words (main path) | code lines (main path) | figures "
        '| "your turn" cells | longest code cell | longest silent stretch |'
    )
    print("|---|---|---|---|---|---|---|")
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


if __name__ == "__main__":
    sys.exit(main())
