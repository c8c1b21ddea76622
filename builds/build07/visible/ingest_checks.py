"""Visible checks of build 07, step 5: ``ingest_page`` against seed 004's verification list
(replays, stale workers, faults mid-page, poison, restarts). `answer_checks` includes them
after the checks of steps 1 to 4, then those of `interrupts`.

Each check opens stores of its own (`sqlite_harness`) and keeps nothing: running one twice
gives the same verdict. Ships to learners and holds no reference seam.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from builds.build07.visible.sqlite_harness import (
    MISSING_ID,
    NOT_CANONICAL,
    OTHER,
    SOURCE,
    TENANT,
    expect_outcome,
    expect_same_state,
    item,
    page,
    page_2_under_fault,
    rows_text,
    scratch_store,
)
from workbook.checks import CheckFailure, Checks, expect, expect_equal

CHECKS = Checks("07")

# ───────────────────────────────────────────────────────────── step 5: ingest_page


@CHECKS.add(step="ingest_page")
def replay_same_batch_same_fixed_point(ns: Any) -> None:
    with scratch_store(ns) as s:
        expect_outcome(
            "ingest_page(conn, tenant='acme', source='ll2', items=page1, expected_cursor=None,"
            " next_cursor='p1')",
            s.ingest(page(0), None, "p1"),
            (4, 0, 0, True, "p1"),
            note="Four new items: applied, and the checkpoint moves from nothing to 'p1'.",
        )
        s.ingest(page(4), "p1", "p2")
        s.ingest(page(8), "p2", "p3")
        once = s.state()
        expect(
            once["checkpoints"] == [(TENANT, SOURCE, "p3", 12)],
            "the checkpoints table after pages 1-3",
            rows_text(once, "checkpoints"),
            "[('acme', 'll2', 'p3', 12)]: the cursor, and how many items the source holds",
        )
        replays: tuple[tuple[str, int, str | None, str], ...] = (
            ("page 3 again (expected_cursor='p2')", 8, "p2", "p3"),
            ("page 1 again (expected_cursor=None)", 0, None, "p1"),
        )
        for label, first, expected, next_cursor in replays:
            expect_outcome(
                f"after pages 1-3: ingest_page(..., {label})",
                s.ingest(page(first), expected, next_cursor),
                (0, 0, 0, False, "p3"),
                note="The checkpoint is not at expected_cursor: compare-and-set misses, nothing"
                " is written, and the outcome carries the persisted cursor.",
            )
            expect_same_state(f"after pages 1-3, {label}", s.state(), once, "as after pages 1-3")
        expect_outcome(
            "after pages 1-3: ingest_page(..., items=[], expected_cursor='p3', next_cursor='p4')",
            s.ingest([], "p3", "p4"),
            (0, 0, 0, True, "p4"),
            note="An empty page moves the checkpoint too: the source is past it.",
        )
        twice = [item(12), item(12, 2, status="Failure"), item(13), item(13)]
        expect_outcome(
            "then ingest_page(..., items=[launch 12 v1, launch 12 v2, launch 13 v1, launch 13"
            " v1], expected_cursor='p4', next_cursor='p5')",
            s.ingest(twice, "p4", "p5"),
            (3, 1, 0, True, "p5"),
            note="Take the items in page order, each counted once, as if delivered one after"
            " the other: a repeated id is applied or unchanged, never skipped.",
        )


@CHECKS.add(step="ingest_page")
def item_failure_holds_checkpoint(ns: Any) -> None:
    with scratch_store(ns) as s:
        page_2_under_fault(
            s,
            "page 2 (ingest_page(..., expected_cursor='p1', next_cursor='p2')) while its third"
            " item's write fails",
            "items",
            where=f"WHEN NEW.item_id = '{item(6)['id']}'",
            raises="raises the database's own sqlite3.IntegrityError",
            raises_note="A failing write is not poison: ROLLBACK, then raise it again.",
            as_before="exactly as before page 2",
            transaction_closed=True,
        )


@CHECKS.add(step="ingest_page")
def checkpoint_failure_rolls_back_items(ns: Any) -> None:
    with scratch_store(ns) as s:
        page_2_under_fault(
            s,
            "page 2 (expected_cursor='p1') while the checkpoint's write fails",
            "checkpoints",
            event="UPDATE",
            raises="raises sqlite3.IntegrityError",
            as_before="exactly as before page 2: its items rolled back",
        )


@CHECKS.add(step="ingest_page")
def stale_run_cannot_overwrite(ns: Any) -> None:
    with scratch_store(ns) as s:
        fast, slow = s.conn, s.open()
        s.ingest(page(0), None, "p1", conn=fast)
        s.ingest(page(4), "p1", "p2", conn=fast)
        s.ingest(page(0, version=2, status="Success"), "p2", "p3", conn=fast)
        newer = s.state()
        call = (
            "worker F: pages 1, 2, then page 1's items at v2 (checkpoint 'p3'); then worker S,"
            " on its own connection, delivers its old copy of page 1 (v1, and launch 60, which"
            " the source has dropped since) with expected_cursor=None"
        )
        expect_outcome(
            call,
            s.ingest([*page(0), item(60)], None, "p1", conn=slow),
            (0, 0, 0, False, "p3"),
            note="S loaded no checkpoint long ago: it must lose, write nothing and learn 'p3'.",
        )
        expect_same_state(
            call,
            s.state(),
            newer,
            "as worker F left it",
            note="A run that loses the compare-and-set rolls its whole page back (launch 60"
            " included): ROLLBACK, not COMMIT.",
        )
        call = "then S goes on from 'p3', with page 1's items at v1 again"
        expect_outcome(
            call,
            s.ingest(page(0), "p3", "p4", conn=slow),
            (0, 4, 0, True, "p4"),
            note="Its cursor is right now, but its versions are older: unchanged, never written.",
        )
        state = s.state()
        expect(
            all(row[3] == 2 for row in state["items"] if row[2] in {i["id"] for i in page(0)}),
            f"{call}: page 1's items",
            rows_text(state, "items"),
            "still at version 2",
        )
        expect_equal(
            f"{call}: the checkpoints table",
            state["checkpoints"],
            [(TENANT, SOURCE, "p4", 8)],
            note="item_count is how many items the source holds (8 launches), recounted with"
            " SELECT COUNT(*): adding each page's applied count would also count the four new"
            " versions.",
        )


@CHECKS.add(step="ingest_page")
def poison_item_recorded_later_items_terminal(ns: Any) -> None:
    with scratch_store(ns) as s:
        poisoned = [item(20), item(21, latitude=math.nan), item(22), item(23)]
        call = (
            "ingest_page(..., items=[launch 20, launch 21 with a NaN latitude, 22, 23],"
            " expected_cursor=None, next_cursor='p1')"
        )
        attempts = 0
        outcome: Any = None
        while attempts < 3 and outcome is None:  # a worker with a budget of three attempts
            attempts += 1
            try:
                outcome = s.ingest(poisoned, None, "p1")
            except sqlite3.Error:
                outcome = None
            except NotImplementedError:
                raise
            except Exception as exc:
                raise CheckFailure(
                    call,
                    exc,
                    "a PageOutcome: the NaN item recorded, the page finished",
                    "A poison item fails the same way on every retry: raising stalls the"
                    " source for good. Record it in failures and go on.",
                ) from None
        expect_equal(f"{call}: attempts needed", attempts, 1)
        expect_outcome(call, outcome, (3, 0, 1, True, "p1"))
        state = s.state()
        want = [(TENANT, SOURCE, item(21)["id"], NOT_CANONICAL, None)]
        expect(
            state["failures"] == want,
            f"{call}: the failures table",
            rows_text(state, "failures"),
            f"{rows_text({'failures': want}, 'failures')!r}: the item's id, the reason, seen_at"
            " = expected_cursor",
            note="Dropping it without a record loses it silently.",
        )
        expect_outcome(
            f"{call}; then page 2 from 'p1'", s.ingest(page(4), "p1", "p2"), (4, 0, 0, True, "p2")
        )
        call = f"{call}; page 2; then page 3 from 'p2': launch 21 again (version '7'), launch 24"
        try:
            again: Any = s.ingest([{**item(21), "version": "7"}, item(24)], "p2", "p3")
        except sqlite3.Error as exc:
            again = exc
        expect_outcome(
            call,
            again,
            (1, 0, 1, True, "p3"),
            note="Poison recorded already is rejected again, without an error: ON CONFLICT"
            " (tenant, source, item_id) DO NOTHING.",
        )
        state = s.state()
        expect(
            state["failures"] == want,
            f"{call}: the failures table",
            rows_text(state, "failures"),
            f"{rows_text({'failures': want}, 'failures')!r}: the first record stands",
            note="DO NOTHING on a conflict, never DO UPDATE: the first reason and seen_at stay.",
        )


@CHECKS.add(step="ingest_page")
def tenants_never_collide(ns: Any) -> None:
    with scratch_store(ns) as s:
        shared = [70, 71, 72]
        acme = [item(n, 1, status="acme's copy") for n in shared]
        globex = [item(n, 4, status="globex's copy") for n in shared]
        s.ingest(acme, None, "a1", tenant=TENANT)
        call = "acme ingests launches 70-72 (v1), then globex the same ids (v4)"
        expect_outcome(
            call,
            s.ingest(globex, None, "b1", tenant=OTHER),
            (3, 0, 0, True, "b1"),
            note="globex has no checkpoint and none of these items yet: scope every key by"
            " tenant and source.",
        )
        state = s.state()
        copies = sorted((row[0], json.loads(row[4])["status"]) for row in state["items"])
        expect_equal(
            f"{call}: (tenant, status) of every stored row",
            copies,
            [(TENANT, "acme's copy")] * 3 + [(OTHER, "globex's copy")] * 3,
        )
        expect_equal(
            f"{call}: the checkpoints table",
            state["checkpoints"],
            [(TENANT, SOURCE, "a1", 3), (OTHER, SOURCE, "b1", 3)],
        )
        call = f"{call}; then acme's next page (launch 74) from 'a1'"
        expect_outcome(call, s.ingest([item(74)], "a1", "a2", tenant=TENANT), (1, 0, 0, True, "a2"))
        expect_equal(
            f"{call}: the checkpoints table",
            s.state()["checkpoints"],
            [(TENANT, SOURCE, "a2", 4), (OTHER, SOURCE, "b1", 3)],
            note="Recount this tenant's source into its own checkpoint row only: WHERE tenant"
            " = ? AND source = ?, in the COUNT(*) and in the UPDATE.",
        )


@CHECKS.add(step="ingest_page")
def error_after_sqlite_rolled_back_propagates(ns: Any) -> None:
    with scratch_store(ns) as s:
        page_2_under_fault(
            s,
            "page 2 (expected_cursor='p1') while its second item's write makes SQLite roll the"
            " whole transaction back itself (RAISE(ROLLBACK), as SQLite may after a full disk)",
            "items",
            action="ROLLBACK",
            where=f"WHEN NEW.item_id = '{item(5)['id']}'",
            raises="raises that sqlite3.IntegrityError itself",
            raises_note="SQLite has ended the transaction already: ROLLBACK only if"
            " conn.in_transaction, or its own error ('no transaction is active') replaces the"
            " one that matters.",
            as_before="exactly as before page 2",
            transaction_closed=True,
        )


@CHECKS.add(step="ingest_page")
def one_transaction_per_page(ns: Any) -> None:
    with scratch_store(ns) as s:
        for label, want in (
            ("", ["BEGIN IMMEDIATE", "COMMIT"]),
            (" again", ["BEGIN IMMEDIATE", "ROLLBACK"]),
        ):
            statements = s.traced(lambda: s.ingest(page(50), None, "p1"))
            expect_equal(
                f"ingest_page(conn, ..., page 1, expected_cursor=None){label}: the transaction"
                " statements it sent (conn.set_trace_callback)",
                statements,
                want,
                note="One BEGIN IMMEDIATE per page, before anything is read: it takes the write"
                " lock at once, so no other worker moves the checkpoint between our compare and"
                " our set. Then COMMIT, or ROLLBACK when the compare-and-set misses.",
            )


@CHECKS.add(step="ingest_page")
def id_less_items_named_where_seen(ns: Any) -> None:
    with scratch_store(ns) as s:
        nameless = {"version": 1, "payload": {"name": "no id"}}
        s.ingest([item(30), item(31), dict(nameless)], None, "p1")
        s.ingest([item(32), item(33), dict(nameless)], "p1", "p2")
        want = [
            (TENANT, SOURCE, "None#2", MISSING_ID, None),
            (TENANT, SOURCE, "p1#2", MISSING_ID, "p1"),
        ]
        expect(
            s.state()["failures"] == want,
            "pages 1 and 2 (expected_cursor None, then 'p1'), each with an item without an id"
            " third: the failures table",
            rows_text(s.state(), "failures"),
            f"{want}: item_id f'{{expected_cursor}}#{{index}}', seen_at expected_cursor",
            note="An id-less item is named by where it was seen: its page's cursor and index.",
        )


@CHECKS.add(step="ingest_page")
def four_workers_deliver_one_page_at_once(ns: Any) -> None:
    # Step 5's third Predict: one advanced=True; one row per item, one record per poison item.
    with scratch_store(ns) as s:
        items = [*page(40, 3), item(43, latitude=math.nan)]
        outcomes = s.at_once(4, lambda conn: s.ingest(items, None, "p1", conn=conn))
        call = "four threads, each on its own open_store(path), delivering page 1 (three"
        call += " launches and one with a NaN latitude, expected_cursor=None) at once"
        won = [o for o in outcomes if getattr(o, "advanced", None) is True]
        expect(len(won) == 1, call, outcomes, "exactly one PageOutcome with advanced=True")
        expect_outcome(f"{call}: the winner", won[0], (3, 0, 1, True, "p1"))
        for other in (o for o in outcomes if o not in won):
            expect_outcome(f"{call}: each of the others", other, (0, 0, 0, False, "p1"))
        state = s.state()
        counts = [len(state[table]) for table in ("items", "failures")] + state["checkpoints"]
        expect_equal(
            f"{call}: rows in items, in failures, and the checkpoint",
            counts,
            [3, 1, (TENANT, SOURCE, "p1", 3)],
        )
