"""Notebooks handed in from a copy made before the build folders moved (``builds/``): each
solution as it was at that commit (outputs stripped), graded here, earns full marks. Their
setup cells import ``workbook.siblings`` and the rest of the pinned surface
(`tests.unit.test_house_rules.SURFACE`); a move that broke one would zero the build.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import Runner
from workbook.shared.manifest import load_manifest

OLDER = Path(__file__).resolve().parent / "fixtures" / "before_the_move"
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("entry", load_manifest().graded, ids=lambda e: e.number)
def test_a_solution_from_before_the_move_earns_full_marks(entry: object) -> None:
    from workbook.shared.manifest import Entry

    assert isinstance(entry, Entry)
    [notebook] = sorted(OLDER.glob(f"{entry.number}_*.ipynb"))
    with Runner() as runner:
        result = runner.grade_notebook(entry.number, notebook)
    lost = [f"{t.name}: {t.message}" for t in result.tests if t.points < t.max_points]
    assert (result.score, lost) == (result.max_score, []), result.label
