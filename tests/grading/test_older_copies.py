"""Notebooks handed in from a copy made before the build folders moved (``builds/``): each
solution as it was at that commit (outputs stripped), graded here, earns full marks. Their
setup cells import ``workbook.siblings`` and the rest of the pinned surface
(`tests.unit.test_house_rules.SURFACE`); a move that broke one would zero the build. Questions
added to a quiz since then (`ADDED_SINCE`) have no answer in such a copy: it earns every point but
theirs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import Runner
from workbook.shared.manifest import load_manifest

OLDER = Path(__file__).resolve().parent / "fixtures" / "before_the_move"
pytestmark = pytest.mark.slow
#: Per graded notebook, the ``ANSWERS`` keys of the questions added after the move.
ADDED_SINCE = {"08": ("q13", "q14", "q15")}


@pytest.mark.parametrize("entry", load_manifest().graded, ids=lambda e: e.number)
def test_a_solution_from_before_the_move_earns_full_marks(entry: object) -> None:
    from workbook.shared.manifest import Entry

    assert isinstance(entry, Entry)
    [notebook] = sorted(OLDER.glob(f"{entry.number}_*.ipynb"))
    with Runner() as runner:
        result = runner.grade_notebook(entry.number, notebook)
    added = ADDED_SINCE.get(entry.number, ())
    new = [t for t in result.tests if t.name.startswith(added)]
    assert all(t.points == 0 for t in new) and len(new) == len(added)
    lost = [
        f"{t.name}: {t.message}" for t in result.tests if t.points < t.max_points and t not in new
    ]
    full = result.max_score - sum(t.max_points for t in new)
    assert (result.score, lost) == (full, []), result.label
