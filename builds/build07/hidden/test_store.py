"""Build 07's judges of open_store (step 1): the pinned schema, identity enforced per
tenant by the database, data kept across a reopen.
"""

from __future__ import annotations

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import (
    expected_text,
    judge_store,
    opened,
    result_text,
    same_result,
    seeded,
    state_difference,
)
from builds.build07.hidden.model import Store, kept_schema, kept_state
from grader.suites.judging import Fail, Observed, check, equal, is_kind, learner_text, listed, ok
from workbook.checking.feedback import message, show_json, show_outcome

UNIQUE_NOTE = (
    "Declare the identity in the schema: PRIMARY KEY (tenant, source, item_id) (or a UNIQUE"
    " constraint on them), so that the database itself refuses a second row."
)


def test_store_has_the_pinned_schema(observed: Observed) -> None:
    seen, rng = seeded(observed, "store_has_the_pinned_schema")
    s = P.Inputs(rng)
    opened(seen)
    check(
        seen["is_connection"] is True,
        "open_store(path)",
        f"a {learner_text(seen['type'])} object",
        "a sqlite3.Connection",
    )
    level = ok(seen["isolation_level"], "open_store(path).isolation_level")
    equal(
        "open_store(path).isolation_level",
        level,
        None,
        note="sqlite3.connect(path, isolation_level=None): no implicit transactions; each page"
        " opens its own with BEGIN IMMEDIATE.",
    )
    schema = kept_schema(observed, seen.get("store"))
    call = "the tables of the new store (read from its file)"
    if not isinstance(schema, dict):
        raise Fail(message(call, "no database file, or not one SQLite can read", "a store"))
    for table, columns in P.COLUMNS.items():
        if table not in schema:
            raise Fail(message(call, show_json(sorted(schema)), f"a table {table}"))
        missing = [c for c in columns if c not in schema[table]["columns"]]
        check(
            not missing,
            f"the columns of {table}",
            show_json(schema[table]["columns"]),
            f"at least {', '.join(columns)}",
        )
        identity = list(P.IDENTITY[table])
        keys = schema[table]["unique"]
        exact = [k for k in keys if sorted(k) == sorted(identity)]
        check(
            bool(exact),
            f"the unique keys of {table}",
            show_json(keys) if keys else "none",
            f"one on exactly ({', '.join(identity)})",
            note=UNIQUE_NOTE if table == "items" else "",
        )
        leading = [k for k in exact if set(k[:2]) == {"tenant", "source"}]
        check(
            bool(leading),
            f"the unique key of {table}",
            show_json(exact[0]),
            "tenant and source as its leading columns",
            note="Lead with the boundary: all of one tenant's source is then one range of the"
            " index, and the key reads as what it means.",
        )
    marker = P.marker_row(s)
    state = kept_state(observed, seen.get("store"))
    rows = state.get("ok", {}).get("items", []) if isinstance(state.get("ok"), dict) else []
    check(
        [list(marker.values())] == rows,
        "open_store(path); conn.close(); an item inserted by another connection; read items",
        show_json(rows),
        show_json([list(marker.values())]),
        note="The store is a file any connection can read: keep nothing in memory only.",
    )


def test_identity_is_enforced_per_tenant(observed: Observed) -> None:
    seen, rng = seeded(observed, "identity_is_enforced_per_tenant")
    s = P.Inputs(rng)
    opened(seen)
    inserts = P.identity_inserts(s)
    results = listed(seen["inserts"], len(inserts), "the inserts", "results")
    store = Store()
    for n, ((table, row), got) in enumerate(zip(inserts, results, strict=True)):
        call = f"INSERT INTO {table} {show_json(row)}"
        if n > 0:
            call = f"after the inserts before it, {call}"
        if n in P.REFUSED:
            check(
                is_kind(got, "IntegrityError"),
                call,
                show_outcome(got) if "raised" in got else "the row was stored",
                "IntegrityError: that identity is already stored",
                note=UNIQUE_NOTE,
            )
            continue
        check(
            "ok" in got,
            call,
            show_outcome(got),
            "the row is stored: another tenant or source is another identity",
            note="Keep tenant and source in the key: an item id is unique only within its"
            " tenant's source. Columns you add need a default.",
        )
        identity = (row["tenant"], row["source"])
        if table == "items":
            store.items[(*identity, row["item_id"])] = (row["version"], row["payload"])
        elif table == "checkpoints":
            store.checkpoints[identity] = (row["cursor"], row["item_count"])
        else:
            store.failures[(*identity, row["item_id"])] = (row["reason"], None)
    judge_store(observed, seen.get("store"), store.rows(), "those inserts", UNIQUE_NOTE)


def test_reopening_keeps_the_data(observed: Observed) -> None:
    seen, rng = seeded(observed, "reopening_keeps_the_data")
    s = P.Inputs(rng)
    opened(seen)
    store = Store()
    first = store.ingest(P.TENANT, P.SOURCE, s.page("p1"), None, s.cursor("p1"))
    call = "conn = open_store(path); ingest page 1; conn.close(); open_store(path) again"
    page = seen["page"]
    check(
        same_result(page, {"ok": first}),
        "ingest page 1",
        result_text(page),
        expected_text({"ok": first}),
    )
    reopened = seen["reopened"]
    check(
        "ok" in reopened,
        call,
        show_outcome(reopened),
        "the store opens again",
        note="Create the tables only if they do not exist yet: CREATE TABLE IF NOT EXISTS.",
    )
    for state in (seen["state"], kept_state(observed, seen.get("kept"))):
        difference = state_difference(state, store.rows())
        check(difference is None, f"{call}; read every table", difference or "", "page 1, kept")
    equal(
        f"{call}; read_checkpoint(conn, {P.TENANT!r}, {P.SOURCE!r})",
        ok(seen["read"], "read_checkpoint(...)"),
        s.cursor("p1"),
    )
    second = store.ingest(P.TENANT, P.SOURCE, s.page("p2"), s.cursor("p1"), s.cursor("p2"))
    check(
        same_result(seen["next"], {"ok": second}),
        f"{call}; ingest page 2 from {s.cursor('p1')!r}",
        result_text(seen["next"]),
        expected_text({"ok": second}),
    )
    difference = state_difference(seen["state_after"], store.rows())
    check(difference is None, f"{call}; page 2; read every table", difference or "", "pages 1-2")
    judge_store(observed, seen.get("store"), store.rows(), f"{call}; page 2")
