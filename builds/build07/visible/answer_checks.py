"""Visible checks of build 07: the schema, compare-and-set checkpoints, poison items, the
versioned upsert, and seed 004's verification list for ``ingest_page``, with a check for every
known bug of the hidden suite and every Predict answer of the notebook (those of interrupted
pages in `interrupts`); step 5's are in `ingest_checks`. Each of those keeps its own
registry, included here last, in that order.

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

from builds.build07.visible import ingest_checks, interrupts
from builds.build07.visible.sqlite_harness import (
    BAD_VERSION,
    COLUMNS,
    KEYS,
    MISSING_ID,
    NOT_CANONICAL,
    OTHER,
    SOURCE,
    TENANT,
    folder,
    holds_launch_0,
    item,
    rows_text,
    scratch_store,
    short_id,
    unique_keys,
)
from workbook.checks import Checks, Said, expect, expect_equal

CHECKS = Checks("07")


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


CHECKS.include(ingest_checks.CHECKS)
CHECKS.include(interrupts.CHECKS)
