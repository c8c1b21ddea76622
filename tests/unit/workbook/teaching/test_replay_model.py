"""The replay explorer's model against notebook 06: every design × disturbance, written out.

`GRID` is the whole grid as literals, each worked out from notebook 06's text and outputs and
the model's stated semantics (its module docstring: the 20-launch feed in 5 pages of 4, the
crash hitting page 3, the duplicate page 3 after a clean run, the stale worker's page 2, the
poison launch 9 refused on every attempt; one replay; a clean run of the same design as the
yardstick), then checked against `run`. The other tests tie the model to the notebook: its
printed numbers, its statements and the tour's three answers.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from etl import replay
from workbook.shared.export import cell_source, cell_tags, read_notebook
from workbook.shared.manifest import repo_root
from workbook.teaching import replay_model
from workbook.teaching.replay_model import (
    BY_NAME,
    COMPARE_AND_SET,
    DESIGNS,
    DISTURBANCES,
    RECORD_JOB,
    Outcome,
    job_id_of,
    run,
    sql_of,
)

NOTEBOOK = repo_root() / "notebooks" / "06_replay_safe_ingestion.ipynb"


class Expected(NamedTuple):
    """What one combination leaves, in `Outcome`'s words."""

    rows: int
    lost: int
    doubled: int
    stale: int
    calls_repeated: int
    calls_lost: int
    recognised: int
    converged: bool


#: (design, disturbance, crash step or None) -> (rows, lost, doubled, stale, calls_repeated,
#: calls_lost, recognised, converged). A clean run is 20 rows, 20 indexer calls.
GRID: dict[tuple[str, str, int | None], tuple[int, int, int, int, int, int, int, bool]] = {
    # §1 naive: each insert commits alone and the checkpoint comes last, so a crash after
    # insert #k leaves k rows of page 3 that the replay inserts again (§1: after #2, 22 rows,
    # 0 lost); after the call, the replay calls again; after the checkpoint, nothing differs.
    ("naive", "crash", 1): (21, 0, 1, 0, 0, 0, 0, False),
    ("naive", "crash", 2): (22, 0, 2, 0, 0, 0, 0, False),
    ("naive", "crash", 3): (23, 0, 3, 0, 0, 0, 0, False),
    ("naive", "crash", 4): (24, 0, 4, 0, 0, 0, 0, False),
    ("naive", "crash", 5): (24, 0, 4, 0, 4, 0, 0, False),
    ("naive", "crash", 6): (20, 0, 0, 0, 0, 0, 0, True),
    # The late page 3 is inserted again and its unconditional checkpoint drags the position
    # back to offset=12 (§7, §12), so the replay redoes pages 4 and 5: 3 pages again. The stale
    # worker's page 2 sets offset=8: pages 2 to 5 again. Its old launch 6 sits beside the new
    # revision (doubled, not stale: one of its rows is the clean run's).
    ("naive", "duplicate", None): (32, 0, 12, 0, 12, 0, 0, False),
    ("naive", "stale", None): (36, 0, 16, 0, 16, 0, 0, False),
    # Page 3's insert #1 commits, #2 is refused (§6: autocommit leaves half a page); the replay
    # inserts #1 again and is refused again: 9 launches stored, 11 lost, pages 3-5 never called.
    ("naive", "poison", None): (10, 11, 1, 0, 0, 12, 0, False),
    # §5 checkpoint first: the checkpoint already says page 3 is done, so whatever was not
    # inserted is lost and the page's call never made (§5: crash after 10 rows, 18 rows,
    # 2 lost); never a double.
    ("checkpoint-first", "crash", 1): (16, 4, 0, 0, 0, 4, 0, False),
    ("checkpoint-first", "crash", 2): (17, 3, 0, 0, 0, 4, 0, False),
    ("checkpoint-first", "crash", 3): (18, 2, 0, 0, 0, 4, 0, False),
    ("checkpoint-first", "crash", 4): (19, 1, 0, 0, 0, 4, 0, False),
    ("checkpoint-first", "crash", 5): (20, 0, 0, 0, 0, 4, 0, False),
    ("checkpoint-first", "crash", 6): (20, 0, 0, 0, 0, 0, 0, True),
    ("checkpoint-first", "duplicate", None): (32, 0, 12, 0, 12, 0, 0, False),
    ("checkpoint-first", "stale", None): (36, 0, 16, 0, 16, 0, 0, False),
    # The checkpoint moved past page 3 before the refusal: the run after it goes on from
    # offset=12, and page 3's last 3 launches (the poison one among them) are never stored.
    ("checkpoint-first", "poison", None): (17, 3, 0, 0, 0, 4, 0, False),
    # §5 checkpoint last with an upsert: a replayed row is replaced, not added (§5: 20 rows,
    # same as one run); only a crash between the call and the checkpoint repeats the call.
    ("checkpoint-last-upsert", "crash", 1): (20, 0, 0, 0, 0, 0, 0, True),
    ("checkpoint-last-upsert", "crash", 2): (20, 0, 0, 0, 0, 0, 0, True),
    ("checkpoint-last-upsert", "crash", 3): (20, 0, 0, 0, 0, 0, 0, True),
    ("checkpoint-last-upsert", "crash", 4): (20, 0, 0, 0, 0, 0, 0, True),
    ("checkpoint-last-upsert", "crash", 5): (20, 0, 0, 0, 4, 0, 0, False),
    ("checkpoint-last-upsert", "crash", 6): (20, 0, 0, 0, 0, 0, 0, True),
    # The rows converge, but the late pages call the indexer again (3 and 4 pages' worth),
    # and the stale page's plain upsert puts the old revision back: last writer wins (§4).
    ("checkpoint-last-upsert", "duplicate", None): (20, 0, 0, 0, 12, 0, 0, False),
    ("checkpoint-last-upsert", "stale", None): (20, 0, 0, 1, 16, 0, 0, False),
    ("checkpoint-last-upsert", "poison", None): (9, 11, 0, 0, 0, 12, 0, False),
    # §6 one transaction: a crash before COMMIT takes the whole page (§6: same as one run);
    # the indexer call inside it has already happened, so a crash after it repeats it.
    ("one-transaction", "crash", 1): (20, 0, 0, 0, 0, 0, 0, True),
    ("one-transaction", "crash", 2): (20, 0, 0, 0, 0, 0, 0, True),
    ("one-transaction", "crash", 3): (20, 0, 0, 0, 0, 0, 0, True),
    ("one-transaction", "crash", 4): (20, 0, 0, 0, 0, 0, 0, True),
    ("one-transaction", "crash", 5): (20, 0, 0, 0, 0, 0, 0, True),
    ("one-transaction", "crash", 6): (20, 0, 0, 0, 4, 0, 0, False),
    ("one-transaction", "crash", 7): (20, 0, 0, 0, 4, 0, 0, False),
    ("one-transaction", "crash", 8): (20, 0, 0, 0, 0, 0, 0, True),
    # No compare-and-set: the late page commits and sets the checkpoint back, as in §7's
    # unconditional update.
    ("one-transaction", "duplicate", None): (20, 0, 0, 0, 12, 0, 0, False),
    ("one-transaction", "stale", None): (20, 0, 0, 1, 16, 0, 0, False),
    # The refusal rolls page 3 back whole, every run: pages 3-5 never stored (§9's stall).
    ("one-transaction", "poison", None): (8, 12, 0, 0, 0, 12, 0, False),
    # §7 compare-and-set: as §6 under a crash; the late page loses the compare-and-set and
    # rolls back (§7: "lost: the checkpoint stays at"), but its indexer call has gone out.
    ("compare-and-set", "crash", 1): (20, 0, 0, 0, 0, 0, 0, True),
    ("compare-and-set", "crash", 2): (20, 0, 0, 0, 0, 0, 0, True),
    ("compare-and-set", "crash", 3): (20, 0, 0, 0, 0, 0, 0, True),
    ("compare-and-set", "crash", 4): (20, 0, 0, 0, 0, 0, 0, True),
    ("compare-and-set", "crash", 5): (20, 0, 0, 0, 0, 0, 0, True),
    ("compare-and-set", "crash", 6): (20, 0, 0, 0, 4, 0, 0, False),
    ("compare-and-set", "crash", 7): (20, 0, 0, 0, 4, 0, 0, False),
    ("compare-and-set", "crash", 8): (20, 0, 0, 0, 0, 0, 0, True),
    ("compare-and-set", "duplicate", None): (20, 0, 0, 0, 4, 0, 0, False),
    ("compare-and-set", "stale", None): (20, 0, 0, 0, 4, 0, 0, False),
    ("compare-and-set", "poison", None): (8, 12, 0, 0, 0, 12, 0, False),
    # §11 outbox: the jobs commit with the rows and leave only after COMMIT; a crash between
    # sending and marking has the repair scan send them again under the same job ids, which the
    # indexer recognises (4). A late page loses its compare-and-set before any call.
    ("outbox", "crash", 1): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 2): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 3): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 4): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 5): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 6): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 7): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 8): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "crash", 9): (20, 0, 0, 0, 0, 0, 4, True),
    ("outbox", "crash", 10): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "duplicate", None): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "stale", None): (20, 0, 0, 0, 0, 0, 0, True),
    ("outbox", "poison", None): (8, 12, 0, 0, 0, 12, 0, False),
}

#: Each design's steps as the explorer labels them: the crash slider's stops.
STEPS: dict[str, list[str]] = {
    "naive": [
        *("insert #1", "insert #2", "insert #3", "insert #4"),
        *("call the indexer ×4", "save checkpoint"),
    ],
    "checkpoint-first": [
        *("save checkpoint", "insert #1", "insert #2", "insert #3", "insert #4"),
        *("call the indexer ×4",),
    ],
    "checkpoint-last-upsert": [
        *("upsert #1", "upsert #2", "upsert #3", "upsert #4"),
        *("call the indexer ×4", "save checkpoint"),
    ],
    "one-transaction": [
        *("BEGIN", "upsert #1", "upsert #2", "upsert #3", "upsert #4"),
        *("call the indexer ×4", "save checkpoint", "COMMIT"),
    ],
    "compare-and-set": [
        *("BEGIN", "upsert #1", "upsert #2", "upsert #3", "upsert #4"),
        *("call the indexer ×4", "compare-and-set", "COMMIT"),
    ],
    "outbox": [
        *("BEGIN", "upsert #1", "upsert #2", "upsert #3", "upsert #4"),
        *("4 jobs to the outbox", "compare-and-set", "COMMIT"),
        *("relay: send 4 jobs", "relay: mark 4 sent"),
    ],
}


@functools.cache
def outcome_of(design: str, disturbance: str, step: int | None) -> Outcome:
    """`run` for a grid key, once per process (the figure's tests read the same outcomes)."""
    return run(design, disturbance, step or 1)  # type: ignore[arg-type]


def said(outcome: Outcome) -> Expected:
    return Expected(*(getattr(outcome, name) for name in Expected._fields))


def combination(design: str, disturbance: str, step: int | None) -> str:
    if step is None:
        return f"{design}, {DISTURBANCES[disturbance]}"  # type: ignore[index]
    return f"{design}, a crash after step {step} ({STEPS[design][step - 1]})"


def grid_id(key: tuple[str, str, int | None]) -> str:
    design, disturbance, step = key
    return f"{design}-{disturbance}" + (f"-{step}" if step else "")


# ── the grid ────────────────────────────────────────────────────────────────────────────


def test_the_designs_are_notebook_06s_named_by_section_and_step() -> None:
    assert [d.name for d in DESIGNS] == list(STEPS)
    assert [d.title.split()[0] for d in DESIGNS] == ["§1", "§5", "§5", "§6", "§7", "§11"]
    assert {d.name: d.step_labels() for d in DESIGNS} == STEPS
    assert list(DISTURBANCES) == ["crash", "duplicate", "stale", "poison"]


def test_the_grid_covers_every_combination_once() -> None:
    every: set[tuple[str, str, int | None]]
    every = {(d.name, "crash", k) for d in DESIGNS for k in range(1, len(d.steps) + 1)}
    every |= {(d.name, other, None) for d in DESIGNS for other in ("duplicate", "stale", "poison")}
    assert set(GRID) == every
    assert len(GRID) == 62


@pytest.mark.parametrize(("design", "disturbance", "step"), list(GRID), ids=map(grid_id, GRID))
def test_each_combination_ends_as_notebook_06_says(
    design: str, disturbance: str, step: int | None
) -> None:
    got, want = (
        said(outcome_of(design, disturbance, step)),
        Expected(*GRID[design, disturbance, step]),
    )
    assert got == want, f"{combination(design, disturbance, step)}: got {got}, expected {want}"


def test_a_verdict_says_what_differs_and_why() -> None:
    expected = {
        ("naive", "crash", 2): "2 rows doubled: the replay inserted again rows the checkpoint"
        " did not cover",
        ("checkpoint-first", "crash", 3): "2 rows lost, 4 indexer calls never made: the"
        " checkpoint moved past items never stored; the checkpoint moved past the page's call",
        ("compare-and-set", "crash", 6): "4 indexer calls made twice: the call came before the"
        " checkpoint that covers it",
        ("compare-and-set", "duplicate", None): "4 indexer calls made twice: the late page called"
        " the indexer before its compare-and-set refused it",
        ("checkpoint-last-upsert", "stale", None): "1 row stale, 16 indexer calls made twice: the"
        " late page replaced a newer revision; the late page called the indexer again and set"
        " the checkpoint back",
        ("outbox", "crash", 9): "converged: the relay sent 4 jobs again, and the indexer"
        " recognised their job ids",
        ("outbox", "crash", 2): "converged: the same rows, checkpoint and indexer calls as one"
        " clean run",
        ("outbox", "poison", None): "12 rows lost, 12 indexer calls never made: b0b50ea2 is"
        " refused on every run, so no run gets past offset=8",
    }
    got = {key: outcome_of(*key).verdict for key in expected}
    assert got == expected


def test_every_verdict_is_one_line_that_agrees_with_converged() -> None:
    for key in GRID:
        outcome = outcome_of(*key)
        assert "\n" not in outcome.verdict, key
        assert outcome.verdict.startswith("converged") == outcome.converged, key


def test_the_same_combination_twice_gives_the_same_outcome() -> None:
    for design in DESIGNS:
        middle = len(design.steps) // 2
        for disturbance in DISTURBANCES:
            first = outcome_of(design.name, disturbance, middle if disturbance == "crash" else None)
            again = run(design.name, disturbance, middle)
            assert again == first, (design.name, disturbance)
            assert (again.counts, again.stale_ids) == (first.counts, first.stale_ids)


@pytest.mark.parametrize(
    ("design", "step"), [("naive", 0), ("naive", 7), ("outbox", 11), ("compare-and-set", -1)]
)
def test_a_crash_step_out_of_range_is_refused(design: str, step: int) -> None:
    with pytest.raises(ValueError, match=rf"{design} has steps 1 to \d+, not {step}"):
        run(design, "crash", step)


# ── notebook 06's own numbers and statements ───────────────────────────────────────────


def notebook_cells() -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = read_notebook(NOTEBOOK)["cells"]
    return cells


def printed(tag: str) -> str:
    """What the notebook's cell tagged `tag` printed, as stored."""
    (cell,) = [c for c in notebook_cells() if tag in cell_tags(c)]
    return "".join("".join(o.get("text", "")) for o in cell["outputs"])


def test_the_notebooks_printed_crashes_come_out_of_the_model() -> None:
    """§1, §5 and §6 crash after 10 rows, two items into page 3: step 2 of a design that
    writes items first, step 3 of checkpoint first and of one transaction."""
    assert "crash, then resume: 22 rows (20 launches)" in printed("naive-job-run")
    assert (outcome_of("naive", "crash", 2).rows, outcome_of("naive", "crash", 2).lost) == (22, 0)
    table = printed("checkpoint-order-crash")
    for line, key in [
        ("checkpoint first (at most once)", ("checkpoint-first", "crash", 3)),
        ("checkpoint last (at least once)", ("naive", "crash", 2)),
        ("checkpoint last + upsert", ("checkpoint-last-upsert", "crash", 2)),
    ]:
        found = re.search(rf"{re.escape(line)}.*?(\d+) rows: (\d+) lost, (\d+) stored twice", table)
        assert found, line
        outcome = outcome_of(*key)
        assert (outcome.rows, outcome.lost, outcome.doubled) == tuple(map(int, found.groups()))
    assert "same as one run?  : True" in printed("atomic-job")
    assert outcome_of("one-transaction", "crash", 3).converged


def test_the_designs_run_notebook_06s_statements() -> None:
    """The tables and statements are etl.replay's (the notebook's), the very objects; the two
    the model names itself are written in the notebook's §7 and §11 cells."""
    assert {d.name: d.table for d in DESIGNS} == {
        "naive": replay.ROWS_NO_KEY,
        "checkpoint-first": replay.ROWS_NO_KEY,
        "checkpoint-last-upsert": replay.ROWS,
        "one-transaction": replay.ROWS,
        "compare-and-set": replay.ROWS,
        "outbox": replay.ROWS,
    }
    assert BY_NAME["naive"].table is replay.ROWS_NO_KEY
    assert sql_of(BY_NAME["naive"])["insert"] is replay.INSERT_PLAIN
    assert sql_of(BY_NAME["checkpoint-first"])["save"] is replay.SAVE_POSITION
    assert sql_of(BY_NAME["one-transaction"])["upsert"] is replay.UPSERT
    assert sql_of(BY_NAME["compare-and-set"])["upsert"] is replay.NEWER_WINS  # §7's run_from
    assert sql_of(BY_NAME["outbox"]) == {
        "upsert": replay.NEWER_WINS,  # §11's commit_page_with_jobs
        "outbox": RECORD_JOB,
        "cas": COMPARE_AND_SET,
    }
    code = "\n".join(cell_source(c) for c in notebook_cells() if c["cell_type"] == "code")
    assert f'"{COMPARE_AND_SET}"' in code  # §7's compare_and_set
    assert f'"{RECORD_JOB}"' in code  # §11's commit_page_with_jobs
    assert 'return digest("index", TENANT, SOURCE, item["id"], str(item["version"]))' in code
    item = replay.as_item(replay.LAUNCHES[3], version=2)
    assert job_id_of(item) == replay.digest("index", "acme", "ll2", item["id"], "2")


class Recorder:
    """A connection that notes each statement it is given, then runs it."""

    def __init__(self, conn: sqlite3.Connection, seen: list[str]) -> None:
        self._conn, self._seen = conn, seen

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._seen.append(sql)
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.mark.parametrize(
    ("design", "writes"),
    [
        ("naive", {replay.INSERT_PLAIN, replay.SAVE_POSITION}),
        ("checkpoint-first", {replay.INSERT_PLAIN, replay.SAVE_POSITION}),
        ("checkpoint-last-upsert", {replay.UPSERT, replay.SAVE_POSITION}),
        ("one-transaction", {replay.UPSERT, replay.SAVE_POSITION}),
        ("compare-and-set", {replay.NEWER_WINS, COMPARE_AND_SET}),
        ("outbox", {replay.NEWER_WINS, COMPARE_AND_SET, RECORD_JOB}),
    ],
)
def test_a_run_writes_rows_checkpoints_and_jobs_only_with_the_notebooks_statements(
    design: str, writes: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    connect = replay.Scratch.connect

    def recording(self: replay.Scratch, path: str | Path, *, timeout: float = 5.0) -> Any:
        return Recorder(connect(self, path, timeout=timeout), seen)

    monkeypatch.setattr(replay.Scratch, "connect", recording)
    run(design, "duplicate")
    tables = ("INSERT INTO launch_rows", "UPDATE sync_state", "INSERT INTO outbox")
    assert {sql for sql in seen if sql.lstrip().startswith(tables)} == writes
    assert {BY_NAME[design].table, replay.SYNC_STATE, replay.OUTBOX} <= set(seen)


# ── the tour's three answers ───────────────────────────────────────────────────────────


def tour() -> str:
    (text,) = [
        cell_source(c)
        for c in notebook_cells()
        if c["cell_type"] == "markdown" and "the replay explorer" in cell_source(c)
    ]
    return " ".join(text.split())


def test_tour_1_the_naive_crash_that_leaves_22_rows() -> None:
    text = tour()
    assert "leaves the 22 rows, none lost" in text and "After step 2, `insert #2`" in text
    assert "Steps 1, 3 and 4 double 1, 3 and 4 rows" in text
    assert "step 5 doubles 4 and repeats the 4 calls" in text
    assert "after `save checkpoint` nothing differs" in text
    two = outcome_of("naive", "crash", 2)
    assert (two.rows, two.lost, two.doubled) == (22, 0, 2)
    assert [outcome_of("naive", "crash", k).doubled for k in (1, 3, 4)] == [1, 3, 4]
    five = outcome_of("naive", "crash", 5)
    assert (five.doubled, five.calls_repeated) == (4, 4)
    assert STEPS["naive"][5] == "save checkpoint" and outcome_of("naive", "crash", 6).converged


def test_tour_2_checkpoint_first_loses_but_never_doubles() -> None:
    text = tour()
    assert "Crash after steps 1 to 4: 4, 3, 2 and 1 rows lost, none doubled" in text
    assert "After step 5 every row is there, but the page's 4 indexer calls are never made" in text
    first = [outcome_of("checkpoint-first", "crash", k) for k in range(1, 7)]
    assert [(o.lost, o.doubled) for o in first[:4]] == [(4, 0), (3, 0), (2, 0), (1, 0)]
    assert (first[4].lost, first[4].rows, first[4].calls_lost) == (0, 20, 4)
    every = [outcome_of(*key) for key in GRID if key[0] == "checkpoint-first"]
    assert not any(o.doubled for o in every if o.disturbance == "crash")


def test_tour_3_what_compare_and_set_does_not_survive_and_the_outbox_does() -> None:
    text = tour()
    assert "A crash after `call the indexer ×4` or the compare-and-set, or a late page" in text
    assert "4 calls made twice" in text and "The outbox (section 11) survives all three" in text
    assert "the transactional ones lose 12 rows, stuck at `offset=8`" in text
    assert "A poison item defeats every design" in text
    assert STEPS["compare-and-set"][5:7] == ["call the indexer ×4", "compare-and-set"]
    for key in [
        ("compare-and-set", "crash", 6),
        ("compare-and-set", "crash", 7),
        ("compare-and-set", "duplicate", None),
        ("compare-and-set", "stale", None),
    ]:
        outcome = outcome_of(*key)
        assert (outcome.calls_repeated, outcome.converged) == (4, False), key
    outbox = [outcome_of("outbox", "crash", k) for k in range(1, 11)]
    assert all(o.converged for o in outbox)
    assert [o.recognised for o in outbox] == [0] * 8 + [4, 0]  # sent again, recognised
    assert outcome_of("outbox", "duplicate", None).converged
    assert outcome_of("outbox", "stale", None).converged
    for design in DESIGNS:
        assert not outcome_of(design.name, "poison", None).converged, design.name
    for name in ("one-transaction", "compare-and-set", "outbox"):
        poisoned = outcome_of(name, "poison", None)
        assert (poisoned.lost, poisoned.position) == (12, "offset=8"), name


def test_the_model_module_keeps_its_stated_constants() -> None:
    """Page 3 takes the crash; launch 9 (page 3's second) is the poison; launch 5 (page 2's
    second) is the one the source revises."""
    assert (replay_model.CRASH_PAGE, replay_model.POISON_AT, replay_model.REVISED_AT) == (3, 9, 5)
    assert replay.page_reached(f"offset={replay_model.POISON_AT}") + 1 == replay_model.CRASH_PAGE
    assert replay.short(replay.LAUNCHES[replay_model.POISON_AT].id) == "b0b50ea2"
