"""Notebook 06's store (`etl.replay`): the feed, the tables and statements, scratch databases,
the fingerprint, and the replay script runner, with the numbers notebook 06 prints."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from etl import replay
from etl.replay import (
    CURRENT,
    INSERT_PLAIN,
    LAUNCHES,
    NEWER_WINS,
    PAGE_SIZE,
    QUARANTINE,
    RECORD_REJECTED,
    ROWS,
    ROWS_NO_KEY,
    SAVE_POSITION,
    SOURCE,
    SYNC_STATE,
    TENANT,
    UPSERT,
    Crash,
    Feed,
    Scratch,
    Step,
    as_item,
    canonical,
    describe,
    digest,
    fetch,
    fingerprint,
    lost_and_doubled,
    page_reached,
    params,
    play,
    position_of,
    row_count,
)
from tests.conftest import ROOT


@pytest.fixture
def scratch() -> Iterator[Scratch]:
    folder = Scratch(prefix="test-replay-")
    yield folder
    folder.close()


def test_the_feed_is_five_pages_of_four_then_empty() -> None:
    cursor: str | None = None
    pages = []
    while True:
        items, cursor_after = fetch(cursor)
        if not items:
            break
        pages.append([item["id"] for item in items])
        cursor = cursor_after
    assert [len(page) for page in pages] == [PAGE_SIZE] * 5
    assert [launch_id for page in pages for launch_id in page] == [x.id for x in LAUNCHES]
    assert cursor == "offset=20"
    assert fetch("offset=20") == ([], "offset=20")


def test_a_cursor_always_gives_the_same_page_and_callers_get_copies() -> None:
    page, after = fetch("offset=8")
    page[0]["payload"]["status"] = "changed by a caller"
    again, after_again = fetch("offset=8")
    assert after == after_again == "offset=12"
    assert again[0]["payload"]["status"] != "changed by a caller"
    assert again == fetch("offset=8")[0]


def test_a_feed_serves_a_replaced_item_until_replaced_again() -> None:
    feed = Feed()
    broken = {**as_item(LAUNCHES[5]), "version": "7"}
    feed.replace(5, broken)
    assert feed.fetch("offset=4")[0][1] == broken
    assert feed.find(LAUNCHES[5].id) == broken
    fixed = as_item(LAUNCHES[5], version=2)
    feed.replace(5, fixed)
    assert feed.fetch("offset=4")[0][1] == fixed
    assert feed.find("no such launch") is None
    assert fetch("offset=4")[0][1] == as_item(LAUNCHES[5]), "the unchanged feed stays unchanged"


def test_canonical_json_and_a_separated_digest() -> None:
    assert canonical({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'
    with pytest.raises(ValueError):
        canonical({"latitude": math.nan})
    assert digest("ab", "c") != digest("a", "bc")
    assert re.fullmatch(r"[0-9a-f]{64}", digest("x"))


def test_new_db_holds_the_tables_and_registers_the_source(scratch: Scratch) -> None:
    conn = scratch.new_db(ROWS, SYNC_STATE)
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert {"launch_rows", "sync_state"} <= tables
    assert conn.isolation_level is None
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert position_of(conn) is None
    assert describe(conn) == "0 rows (0 launches), position None"
    bare = scratch.new_db(ROWS)
    assert row_count(bare) == 0, "no sync_state asked for, none made"


def test_a_restart_loses_what_was_not_committed(scratch: Scratch) -> None:
    conn = scratch.new_db(ROWS, SYNC_STATE)
    conn.execute(UPSERT, params(as_item(LAUNCHES[0])))  # committed at once
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(UPSERT, params(as_item(LAUNCHES[1])))
    conn.execute(SAVE_POSITION, ("offset=4", TENANT, SOURCE))
    conn = scratch.restart(conn)
    assert describe(conn) == "1 rows (1 launches), position None"


def test_close_is_harmless_twice() -> None:
    folder = Scratch()
    conn = folder.new_db(ROWS)
    path = Path(replay.path_of(conn))
    assert path.exists()
    folder.close()
    folder.close()
    assert not path.exists()


def test_replace_converges_and_newer_wins_keeps_the_newer(scratch: Scratch) -> None:
    conn = scratch.new_db(ROWS)
    item = as_item(LAUNCHES[0], version=2)
    for _ in range(3):
        conn.execute(UPSERT, params(item))
    assert row_count(conn) == 1
    older = {**as_item(LAUNCHES[1]), "id": item["id"], "version": 1}
    assert conn.execute(NEWER_WINS, params(older)).rowcount == 0
    stored = conn.execute("SELECT version, body FROM launch_rows").fetchone()
    assert stored == (2, canonical(item["payload"]))


def test_plain_inserts_have_no_key_to_stop_a_repeat(scratch: Scratch) -> None:
    conn = scratch.new_db(ROWS_NO_KEY)
    for _ in range(2):
        conn.execute(INSERT_PLAIN, params(as_item(LAUNCHES[0])))
    assert row_count(conn) == 2
    assert lost_and_doubled(conn) == (19, 1)


def test_a_rejected_item_is_recorded_once(scratch: Scratch) -> None:
    conn = scratch.new_db(QUARANTINE)
    for _ in range(2):
        conn.execute(RECORD_REJECTED, (TENANT, SOURCE, "x", None, "missing id"))
    assert conn.execute("SELECT state, attempts FROM quarantine").fetchall() == [("rejected", 1)]


def test_the_fault_triggers_refuse_their_write(scratch: Scratch) -> None:
    conn = scratch.new_db(ROWS, SYNC_STATE, replay.FAIL_CHECKPOINT, replay.fail_item("it's"))
    with pytest.raises(sqlite3.IntegrityError, match="checkpoint write failed"):
        conn.execute(SAVE_POSITION, ("offset=4", TENANT, SOURCE))
    with pytest.raises(sqlite3.IntegrityError, match="item write failed"):
        conn.execute(UPSERT, params({**as_item(LAUNCHES[0]), "id": "it's"}))
    conn.execute(UPSERT, params(as_item(LAUNCHES[0])))
    assert row_count(conn) == 1


def test_the_fingerprint_ignores_the_order_of_writing(scratch: Scratch) -> None:
    forwards, backwards = scratch.new_db(ROWS, SYNC_STATE), scratch.new_db(ROWS, SYNC_STATE)
    items = fetch(None)[0]
    for item in items:
        forwards.execute(UPSERT, params(item))
    for item in reversed(items):
        backwards.execute(UPSERT, params(item))
    assert fingerprint(forwards) == fingerprint(backwards)
    backwards.execute(SAVE_POSITION, ("offset=4", TENANT, SOURCE))
    assert fingerprint(forwards) != fingerprint(backwards)
    assert re.fullmatch(r"[0-9a-f]{12}", fingerprint(forwards))


def test_page_reached_counts_whole_pages() -> None:
    assert [page_reached(p) for p in (None, "offset=4", "offset=20")] == [0, 1, 5]


#: Notebook 06's replay script (section 12): the position each worker loaded, and when it dies.
SCRIPT: list[Step] = [
    ("run", CURRENT, None),
    ("run", CURRENT, None),
    ("crash", CURRENT, 2),
    ("restart", CURRENT, None),
    ("page 3 redelivered", "offset=8", None),
    ("run", CURRENT, None),
    ("stale worker", "offset=4", None),
    ("run", CURRENT, None),
    ("run", CURRENT, None),
    ("re-run from scratch", None, None),
]


def naive(conn: sqlite3.Connection, loaded: str | None, crash_after: int | None) -> None:
    items, next_position = fetch(loaded)
    for number, item in enumerate(items, start=1):
        conn.execute(INSERT_PLAIN, params(item))
        if number == crash_after:
            raise Crash
    if items:
        conn.execute(SAVE_POSITION, (next_position, TENANT, SOURCE))


def test_play_gives_notebook_06s_numbers_for_the_naive_design(scratch: Scratch) -> None:
    played = play(scratch, ROWS_NO_KEY, naive, SCRIPT)
    assert played.rows == [4, 8, 10, 14, 18, 22, 26, 30, 34, 38]
    assert played.pages == [1, 2, 2, 3, 3, 4, 2, 3, 4, 1]
    assert played.end == "38 rows (16 launches), position offset=4"
    assert re.fullmatch(r"[0-9a-f]{12}", played.print)


def test_play_restarts_after_a_crash_and_loses_the_uncommitted(scratch: Scratch) -> None:
    def all_or_nothing(conn: sqlite3.Connection, loaded: str | None, dies: int | None) -> None:
        items, next_position = fetch(loaded)
        conn.execute("BEGIN IMMEDIATE")  # never committed when it dies: the restart rolls back
        for number, item in enumerate(items, start=1):
            conn.execute(UPSERT, params(item))
            if number == dies:
                raise Crash
        conn.execute(SAVE_POSITION, (next_position, TENANT, SOURCE))
        conn.execute("COMMIT")

    played = play(scratch, ROWS, all_or_nothing, SCRIPT[:4])
    assert played.rows == [4, 8, 8, 12]
    assert played.pages == [1, 2, 2, 3]


NOTEBOOK = ROOT / "notebooks" / "06_replay_safe_ingestion.ipynb"
SHOWN = re.compile(r"^-- ([A-Z_]+)\n(.*?)(?=^-- |\Z)", re.MULTILINE | re.DOTALL)


def _flat(sql: str) -> str:
    return " ".join(sql.split())


def test_the_sql_notebook_06_shows_is_the_sql_it_runs() -> None:
    """Each ```sql block of the notebook labelled ``-- NAME`` shows the module's NAME."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    blocks = re.findall(r"```sql\n(.*?)```", text, re.DOTALL)
    shown = {name: body for block in blocks for name, body in SHOWN.findall(block)}
    assert {"ROWS_NO_KEY", "SYNC_STATE", "ROWS", "UPSERT", "QUARANTINE"} <= shown.keys()
    for name, body in shown.items():
        assert _flat(body) == _flat(getattr(replay, name)), name
