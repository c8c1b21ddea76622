"""`workbook.palette`: one colour-blind-safe palette, and no colour written anywhere else in
`workbook` or in a notebook's code (a figure draws with the palette's names)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from matplotlib.colors import to_rgb

from tests.conftest import ROOT
from workbook import palette

#: A colour spelled out: a hex literal, a named matplotlib colour passed as one, a tab: or CN
#: cycle colour. "none" (no fill) is no colour.
LITERAL = re.compile(
    r"""["']\#[0-9a-fA-F]{3,8}["']"""
    r"""|["'](tab:\w+|C\d)["']"""
    r"""|(colou?r\w*|facecolors?|edgecolors?)["']?\s*[=:]\s*["'](?!none["'])[a-z]+["']"""
)


def _code_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_the_eight_colours_are_okabe_and_itos() -> None:
    eight = (palette.BLACK, palette.ORANGE, palette.SKY_BLUE, palette.BLUISH_GREEN)
    eight += (palette.YELLOW, palette.BLUE, palette.VERMILLION, palette.REDDISH_PURPLE)
    assert [tuple(round(c * 255) for c in to_rgb(h)) for h in eight] == [
        (0, 0, 0),
        (230, 159, 0),
        (86, 180, 233),
        (0, 158, 115),
        (240, 228, 66),
        (0, 114, 178),
        (213, 94, 0),
        (204, 121, 167),
    ]


def test_a_tint_runs_from_the_colour_to_white() -> None:
    assert palette.tint(palette.BLUE, 0) == palette.BLUE
    assert palette.tint(palette.BLUE, 1) == palette.WHITE
    assert palette.tint("#000000", 0.5) == "#808080"
    assert palette.tint(palette.ORANGE, 0.75) == palette.tint(palette.ORANGE, 0.75)
    with pytest.raises(ValueError, match=r"between 0 and 1, not 1\.5"):
        palette.tint(palette.BLUE, 1.5)


def test_no_colour_is_written_outside_the_palette() -> None:
    found = []
    for path in sorted((ROOT / "workbook").rglob("*.py")):
        if path.name != "palette.py":
            for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
                if LITERAL.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    for folder in ("notebooks", "exercises", "solutions"):
        for notebook in sorted((ROOT / folder).glob("*.ipynb")):
            for index, source in enumerate(_code_cells(notebook)):
                found += [
                    f"{folder}/{notebook.name} code cell {index}: {m.group(0)}"
                    for m in LITERAL.finditer(source)
                ]
    assert found == [], "draw with workbook.palette's names"


@pytest.mark.parametrize(
    "line",
    ['ax.plot(x, color="#d62728")', "c = 'tab:red'", 'edgecolor="grey"', '{"color": "black"}'],
)
def test_the_scan_sees_a_colour_however_it_is_written(line: str) -> None:
    assert LITERAL.search(line)


def test_the_scan_lets_no_fill_and_the_palette_pass() -> None:
    assert not LITERAL.search('ax.bar(x, facecolors="none", edgecolor=palette.BLUE)')


def test_a_figure_that_names_no_colour_draws_with_the_palette() -> None:
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    lines = [ax.plot([0, 1], [i, i])[0] for i in range(3)]
    assert [line.get_color() for line in lines] == list(palette.CYCLE[:3])
