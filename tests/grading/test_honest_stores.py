"""An honest build 07 earns full marks however its store's file is left: the solution with its
connection put in each journal mode SQLite offers, graded walled (issue 25, item 3)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from builds.build07.hidden.probes import item_text
from grader import Runner, load_suite
from workbook.shared.export import export_source
from workbook.shared.manifest import load_manifest, repo_root

pytestmark = pytest.mark.slow

ROOT = repo_root()
ENTRY = load_manifest().entry("07")
OPEN = "    conn.executescript(SCHEMA)\n"


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with Runner(walls="bwrap") as graded:
        yield graded.start()


@pytest.mark.parametrize("mode", ["DELETE", "TRUNCATE", "PERSIST", "WAL", "MEMORY"])
def test_the_solution_in_any_journal_mode_earns_every_point(runner: Runner, mode: str) -> None:
    assert ENTRY.solution is not None
    source = export_source(ROOT / ENTRY.solution)
    assert source.count(OPEN) == 1
    moded = source.replace(OPEN, f'    conn.execute("PRAGMA journal_mode={mode}")\n{OPEN}')
    result = runner.grade_source("07", moded, label=mode, suite=load_suite("07"), entry=ENTRY)
    assert result.score == result.max_score, [t.message for t in result.tests if not t.passed]


def test_an_item_is_shown_with_its_sets_sorted() -> None:
    # The judges' text of an item goes through the one stable repr (`workbook.checking.feedback`).
    item = {"id": "p-set", "payload": {"tags": {"kiwi", "fig", "yam", "pea"}}}
    assert item_text(item) == "{'id': 'p-set', 'payload': {'tags': {'fig', 'kiwi', 'pea', 'yam'}}}"
