"""Visible checks of build 07: the schema, compare-and-set checkpoints, poison items, the
versioned upsert, and seed 004's verification list for ``ingest_page``, with a check for every
known bug of the hidden suite and every Predict answer of the notebook (those of interrupted
pages in `build07_interrupts`, imported last: it registers them here).

Each check takes the learner's namespace, opens stores of its own in a temporary folder
(removed when the check ends), reads them back through a connection of its own, and, when
something is off, says the call it made, what came back and what it expected. Checks keep no
state between runs. Expected values are written out by hand for small, fixed inputs, or are
properties (a replay leaves the store as it was); this module holds no reference seam.
"""

from __future__ import annotations

import json
import math
import sqlite3
from types import MappingProxyType
from typing import Any

from builds.build07.visible.sqlite_harness import (
    COLUMNS,
    KEYS,
    OTHER,
    SOURCE,
    TENANT,
    expect_outcome,
    expect_same_state,
    folder,
    holds_launch_0,
    item,
    page,
    page_2_under_fault,
    rows_text,
    scratch_store,
    short_id,
    unique_keys,
)
from workbook.checks import CheckFailure, Checks, Said, expect, expect_equal

CHECKS = Checks("07")

MISSING_ID = "missing id"
BAD_VERSION = "version is not an integer"
NOT_CANONICAL = "payload has no canonical JSON form"

# ───────────────────────────────────────────────────────────── step 1: open_store


@CHECKS.add(step="open_store")
def store_has_the_pinned_schema(ns: Any) -> None:
    with folder() as where:
        path = where / "store.sqlite"
        conn = ns.open_store(path)
        try:
            expect(
                isinstance(conn, sqlite3.Connection),
                "open_store(path)",
                conn,
                "a sqlite3.Connection",
            )
            expect_equal(
                "open_store(path).isolation_level",
                conn.isolation_level,
                None,
                note="sqlite3.connect(path, isolation_level=None): no transaction opens behind"
                " your back; you write BEGIN IMMEDIATE ... COMMIT yourself.",
            )
        finally:
            conn.close()
        db = sqlite3.connect(path)
        try:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for table, columns in COLUMNS.items():
                expect(
                    table in tables, "the tables of open_store(path)", tables, f"a {table} table"
                )
                have = [row[1] for row in db.execute(f"PRAGMA table_info('{table}')")]
                missing = [c for c in columns if c not in have]
                expect(not missing, f"the columns of {table}", have, f"at least {columns}")
                keys = unique_keys(db, table)
                wanted = KEYS[table]
                expect(
                    any(sorted(k) == sorted(wanted) for k in keys),
                    f"the unique keys of {table}",
                    keys,
                    f"PRIMARY KEY {wanted} (or UNIQUE on exactly those columns)",
                    note="The database must refuse a second row for one identity; an item id is"
                    " unique only within its tenant's source.",
                )
                expect(
                    any(
                        set(k[:2]) == {"tenant", "source"}
                        for k in keys
                        if sorted(k) == sorted(wanted)
                    ),
                    f"the key of {table}",
                    keys,
                    "tenant and source leading",
                )
            db.execute(
                "INSERT INTO items (tenant, source, item_id, version, payload)"
                " VALUES ('acme', 'll2', 'kept', 1, '{}')"
            )
            db.commit()
        finally:
            db.close()
        call = "open_store(path) on a store holding an item ('acme', 'll2', 'kept')"
        again = ns.open_store(path)
        again.close()
        db = sqlite3.connect(path)
        try:
            rows = db.execute("SELECT tenant, source, item_id FROM items").fetchall()
        finally:
            db.close()
        expect_equal(
            f"{call}; then the items table",
            rows,
            [("acme", "ll2", "kept")],
            note="A restart opens the same file: CREATE TABLE IF NOT EXISTS, never DROP.",
        )


@CHECKS.add(step="open_store")
def identity_is_enforced_per_tenant(ns: Any) -> None:
    with scratch_store(ns) as s:
        insert = "INSERT INTO items (tenant, source, item_id, version, payload) VALUES"
        s.execute(f"{insert} ('acme', 'll2', 'x', 1, '1')")
        for values, refused in (
            ("('acme', 'll2', 'x', 2, '2')", True),
            ("('globex', 'll2', 'x', 1, '1')", False),
            ("('acme', 'snapi', 'x', 1, '1')", False),
        ):
            call = f"{insert} {values}, after ('acme', 'll2', 'x', 1, '1')"
            try:
                s.execute(f"{insert} {values}")
                got: Any = Said("stored")
            except sqlite3.IntegrityError as exc:
                got = exc
            expect(
                isinstance(got, sqlite3.IntegrityError) == refused,
                call,
                got,
                "IntegrityError: that identity is stored already"
                if refused
                else "stored: another tenant or source is another identity",
            )


# ───────────────────────────────────────────────────────────── step 2: checkpoints

CHECKPOINT_CALLS: tuple[tuple[str, tuple[Any, ...], Any], ...] = (
    ("read_checkpoint", (TENANT, SOURCE), None),
    ("advance_checkpoint", (TENANT, SOURCE, None, "p1"), True),
    ("read_checkpoint", (TENANT, SOURCE), "p1"),
    ("advance_checkpoint", (TENANT, SOURCE, None, "p9"), False),
    ("advance_checkpoint", (TENANT, SOURCE, "p0", "p9"), False),
    ("advance_checkpoint", (TENANT, SOURCE, "p1", "p2"), True),
    ("advance_checkpoint", (TENANT, SOURCE, "p1", "p3"), False),
    ("read_checkpoint", (TENANT, SOURCE), "p2"),
    ("read_checkpoint", (OTHER, SOURCE), None),
    ("advance_checkpoint", (OTHER, SOURCE, "p2", "p3"), False),
    ("advance_checkpoint", (OTHER, SOURCE, None, "q1"), True),
    ("read_checkpoint", (OTHER, SOURCE), "q1"),
    ("read_checkpoint", (TENANT, SOURCE), "p2"),
    # Step 2's Predict: A moves "p4" -> "p5" -> "p6"; then B, which loaded "p4", is too late.
    ("advance_checkpoint", (TENANT, "snapi", None, "p4"), True),
    ("advance_checkpoint", (TENANT, "snapi", "p4", "p5"), True),
    ("advance_checkpoint", (TENANT, "snapi", "p5", "p6"), True),
    ("advance_checkpoint", (TENANT, "snapi", "p4", "p5"), False),
    ("read_checkpoint", (TENANT, "snapi"), "p6"),
    # A cursor that looks like a number is still the str that was stored.
    ("advance_checkpoint", (TENANT, "rss", None, "40"), True),
    ("read_checkpoint", (TENANT, "rss"), "40"),
    ("advance_checkpoint", (TENANT, "rss", "40", "80"), True),
    ("read_checkpoint", (TENANT, "rss"), "80"),
)
#: The checkpoints table after CHECKPOINT_CALLS: advance_checkpoint alone never counts items.
CHECKPOINT_ROWS = [
    (TENANT, SOURCE, "p2", 0),
    (TENANT, "rss", "80", 0),
    (TENANT, "snapi", "p6", 0),
    (OTHER, SOURCE, "q1", 0),
]


@CHECKS.add(step="checkpoints")
def checkpoint_moves_only_by_compare_and_set(ns: Any) -> None:
    with scratch_store(ns) as s:
        before = "a new store"
        for name, args, want in CHECKPOINT_CALLS:
            call = f"{name}(conn, {', '.join(repr(a) for a in args)})"
            got = getattr(ns, name)(s.conn, *args)
            note = (
                "Move only from expected_cursor (None: insert the first row, only if there is"
                " none) and return whether a row changed: rowcount == 1."
                if name == "advance_checkpoint"
                else "None when this tenant's source has no checkpoint yet."
            )
            expect_equal(f"after {before}: {call}", got, want, note=note)
            before = call
        expect_equal(
            "the checkpoints table after those calls",
            s.state()["checkpoints"],
            CHECKPOINT_ROWS,
            note="A first row is (tenant, source, next_cursor, 0): item_count 0 until a page"
            " recounts it; cursor is TEXT, stored and returned as the str it was given.",
        )


# ───────────────────────────────────────────────────────────── step 3: poison_reason

POISON_CASES: tuple[tuple[Any, str | None], ...] = (
    ({"id": "a", "version": 1, "payload": {"ok": True}}, None),
    ({"id": "d", "version": 3, "payload": None}, None),
    ({"id": "e", "version": -1, "payload": []}, None),
    ({"version": 1, "payload": {}}, MISSING_ID),
    ({"id": "", "version": 1, "payload": {}}, MISSING_ID),
    ({"id": 7, "version": 1, "payload": {}}, MISSING_ID),
    ("not a mapping", MISSING_ID),
    ({"id": "a", "version": True, "payload": {}}, BAD_VERSION),
    ({"id": "a", "version": "7", "payload": {}}, BAD_VERSION),
    ({"id": "b", "version": 2**63, "payload": {}}, BAD_VERSION),
    ({"id": "b", "version": -(2**63) - 1, "payload": {}}, BAD_VERSION),
    ({"id": "b", "version": 2**63 - 1, "payload": {}}, None),  # the range is inclusive
    ({"id": "b", "version": -(2**63), "payload": {}}, None),
    ({"id": "f", "version": 2.0, "payload": {}}, BAD_VERSION),
    (MappingProxyType({"id": "m", "version": 1, "payload": {}}), None),  # any Mapping
    ({"id": "e", "version": -1, "payload": {"lat": math.nan}}, NOT_CANONICAL),
    ({"id": "a", "payload": {"lat": math.inf}}, BAD_VERSION),  # the version's rule comes first
    ({"id": "c", "version": 3}, NOT_CANONICAL),
    ({"id": "a", "version": 1, "payload": {"lat": math.nan}}, NOT_CANONICAL),
    ({"id": "a", "version": 1, "payload": {"tags": {"x"}}}, NOT_CANONICAL),
    ({"version": "x", "payload": math.inf}, MISSING_ID),
)


@CHECKS.add(step="poison_reason")
def poison_items_are_classified(ns: Any) -> None:
    for case, want in POISON_CASES:
        got = ns.poison_reason(case)
        expect_equal(
            f"poison_reason({case!r})",
            got,
            want,
            note="Check the id, then the version (type(v) is int, within SQLITE_MIN_INT and"
            " SQLITE_MAX_INT), then the payload (present, canonical_json succeeds); return"
            " one of the three constants, or None.",
        )


# ───────────────────────────────────────────────────────────── step 4: upsert_item


@CHECKS.add(step="upsert_item")
def replace_never_accumulate(ns: Any) -> None:
    first, bumped = item(0), item(0, 2, status="Success")
    note = (
        "Upsert on the unique key (tenant, source, item_id): a repeat replaces the stored"
        " version and payload, never adds to them, and only when the incoming version is"
        " higher; the statement's rowcount tells applied from unchanged (notebooks 04 and 06)."
    )
    with scratch_store(ns) as s:
        results = [
            ns.upsert_item(s.conn, TENANT, SOURCE, dict(first)),
            ns.upsert_item(s.conn, TENANT, SOURCE, dict(first)),
        ]
        expect_equal(
            f"upsert_item(conn, 'acme', 'll2', launch {short_id(0)} v1), twice",
            results,
            ["applied", "unchanged"],
            note=note,
        )
        state = s.state()
        expect(
            holds_launch_0(state["items"], 1),
            "the items table after those two calls",
            rows_text(state, "items"),
            "one row, its payload canonical_json(item['payload'])",
            note=note,
        )
        expect_equal(
            f"upsert_item(conn, 'acme', 'll2', launch {short_id(0)} v2, status changed)",
            ns.upsert_item(s.conn, TENANT, SOURCE, bumped),
            "applied",
        )
        state = s.state()
        expect(
            holds_launch_0(state["items"], 2),
            "the items table after v2",
            rows_text(state, "items"),
            "still one row, now version 2 with v2's payload: replaced, not added to",
        )


@CHECKS.add(step="upsert_item")
def newer_version_wins(ns: Any) -> None:
    calls = (
        ("v2", item(5, 2, status="Go"), "applied"),
        ("v2 again", item(5, 2, status="Go"), "unchanged"),
        ("v1 (stale)", item(5, 1, status="TBD"), "unchanged"),
        ("v2, another payload", item(5, 2, status="Hold"), "unchanged"),
        ("v3", item(5, 3, status="Success"), "applied"),
    )
    with scratch_store(ns) as s:
        done = "a new store"
        for label, given, want in calls:
            call = f"after {done}: upsert_item(conn, 'acme', 'll2', launch {short_id(5)} {label})"
            got = ns.upsert_item(s.conn, TENANT, SOURCE, given)
            expect_equal(
                call,
                got,
                want,
                note="Only a strictly higher version replaces the row; equal or lower leaves it.",
            )
            done = f"{done}, {label}" if done != "a new store" else label
        version, payload = s.state()["items"][0][3:]
        expect_equal(
            "the stored version and status after those calls",
            (version, json.loads(payload)["status"]),
            (3, "Success"),
        )


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


from builds.build07.visible import interrupts as build07_interrupts  # noqa: E402, F401  (registers its checks)
