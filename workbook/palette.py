"""The one palette every figure draws with: Okabe and Ito's eight colours, chosen to stay
distinct under the common forms of colour blindness (Okabe & Ito, "Color Universal Design",
2008), plus greys and tints made from them. A figure tells each state by shape, line style or
label too, never by colour alone; a test fails on any colour written anywhere else in
`workbook` or in a notebook's code.

Importing it makes matplotlib's default colour cycle these colours too (`use`), so a figure
that names no colour draws with them. Reading a colour twice gives the same string; `tint` of
the same colour and amount too; `use` again changes nothing.
"""

from __future__ import annotations

from cycler import cycler
from matplotlib import rcParams

BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
BLUISH_GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
REDDISH_PURPLE = "#CC79A7"

WHITE = "#FFFFFF"
#: Text and rules that should recede: dark enough to read on white (contrast above 4.5:1).
DARK_GREY = "#595959"
#: Reference lines and "nothing happened" marks.
GREY = "#999999"

#: What a figure means by each, wherever it draws it: a failure is vermillion, a success
#: bluish green, the thing under study blue.
BAD, GOOD, MAIN = VERMILLION, BLUISH_GREEN, BLUE


def tint(colour: str, amount: float) -> str:
    """`colour` mixed with white: 0 gives the colour, 1 gives white (for backgrounds and
    ranges behind the data). Raises `ValueError` unless 0 <= amount <= 1."""
    if not 0 <= amount <= 1:
        raise ValueError(f"amount must be between 0 and 1, not {amount}")
    channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    mixed = [round(c + (255 - c) * amount) for c in channels]
    return "#" + "".join(f"{c:02X}" for c in mixed)


#: The order in which a figure that names no colour draws its series.
CYCLE = (BLUE, ORANGE, BLUISH_GREEN, VERMILLION, REDDISH_PURPLE, SKY_BLUE, YELLOW, BLACK)


def use() -> None:
    """Make `CYCLE` matplotlib's default colour cycle (done once, when this module loads)."""
    rcParams["axes.prop_cycle"] = cycler(color=list(CYCLE))


use()
