"""Build 07's test-writing steps: the seams each learner test tests, and the bugs of their
``catches`` laid over those seams.

Each bug wraps the learner's functions through what crosses them (the connection, the
arguments, the outcome), whatever their bodies: the compare of the checkpoint's
compare-and-set, the version of the upsert, the rollback of a losing page, the recount. A
connection handed on is wrapped (`_LaidConnection`) where a bug must act inside the page's own
transaction, so the commits a store shows are those of the bug's twin in the hidden
``mutants.toml``. The one thing the contract leaves free that a test can see is the order of
rows a query without ORDER BY returns: the contract variant changes it. This module ships to
learners: no answer is here.
"""

from __future__ import annotations

from workbook.checking.layover import LaidOver, over

#: Test-writing steps: the learner's test -> the seams it tests.
LEARNER_TESTS: dict[str, tuple[str, ...]] = {
    "test_replay_reaches_a_fixed_point": ("ingest_page", "advance_checkpoint"),
    "test_state_machine_equals_one_clean_run": ("ingest_page",),
}
#: Generic mutants tried per test for advice (instead of
#: `workbook.checking.learnertests.MAX_MUTANTS`), so that a step's self-check answers within two
#: seconds: a state machine costs 60 ms a run.
MAX_MUTANTS_OF: dict[str, int] = {
    "test_replay_reaches_a_fixed_point": 30,
    "test_state_machine_equals_one_clean_run": 6,
}

_CONNECTION = '''
import sys as _laid_sys


class _LaidConnection:
    """The caller's connection; `after_begin` runs inside each transaction opened through it,
    `before_commit` just before it commits, `before_checkpoint` before the first statement
    that writes the checkpoints table; with `keep_losers`, a ROLLBACK asked for while no
    exception is on its way commits instead."""

    def __init__(
        self, conn, after_begin=None, before_commit=None, before_checkpoint=None, keep_losers=False
    ):
        object.__setattr__(self, "_laid", (conn, after_begin, before_commit))
        object.__setattr__(self, "_laid_checkpoint", [before_checkpoint])
        object.__setattr__(self, "_laid_keep", keep_losers)

    def __getattr__(self, name):
        return getattr(self._laid[0], name)

    def __setattr__(self, name, value):
        setattr(self._laid[0], name, value)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):  # as sqlite3's own: commit, or roll back on an error
        if self._laid[0].in_transaction:
            self.commit() if kind is None else self._laid[0].rollback()
        return False

    def executescript(self, script):
        return self.execute(script) if script.strip().upper().rstrip(";") in (
            "BEGIN", "BEGIN IMMEDIATE", "BEGIN EXCLUSIVE", "BEGIN DEFERRED", "COMMIT", "END",
            "ROLLBACK",
        ) else self._laid[0].executescript(script)

    def execute(self, sql, *args):
        conn, after_begin, before_commit = self._laid
        head = sql.lstrip().upper()
        if self._laid_keep and head.startswith("ROLLBACK") and _laid_sys.exc_info()[0] is None:
            sql = head = "COMMIT"
        if before_commit is not None and head.startswith(("COMMIT", "END")):
            before_commit(conn)
        pending = self._laid_checkpoint
        writes = head.startswith(("INSERT", "UPDATE", "REPLACE", "DELETE"))
        if pending[0] is not None and writes and "CHECKPOINTS" in head:
            pending[0], call = None, pending[0]
            call(conn)
        cursor = conn.execute(sql, *args)
        if after_begin is not None and head.startswith("BEGIN"):
            after_begin(conn)
        return cursor

    def commit(self):
        conn, _, before_commit = self._laid
        if before_commit is not None and conn.in_transaction:
            before_commit(conn)
        return conn.commit()

    def rollback(self):
        if self._laid_keep and _laid_sys.exc_info()[0] is None:
            return self.commit()
        return self._laid[0].rollback()
'''


def _page(body: str) -> str:
    """An `ingest_page` laid over the learner's: `body` may call ``laid_page(conn)``, theirs
    on the same page through `conn`."""
    return over(
        "ingest_page",
        "def ingest_page(conn, *, tenant, source, items, expected_cursor, next_cursor):\n"
        "    def laid_page(conn):\n"
        "        return under(conn, tenant=tenant, source=source, items=items,"
        " expected_cursor=expected_cursor, next_cursor=next_cursor)\n" + body,
    )


_CAS_DROPPED = (
    _CONNECTION + "def _laid_put(conn, tenant, source, cursor, first):\n"
    "    # Put the checkpoint where the caller expects it, so the compare always succeeds:\n"
    "    # removed, then made again there by the learner's own first compare-and-set.\n"
    "    conn.execute('DELETE FROM checkpoints WHERE tenant = ? AND source = ?',"
    " (tenant, source))\n"
    "    if cursor is not None:\n"
    "        first(conn, tenant, source, None, cursor)\n"
    "_laid_cas = advance_checkpoint\n"
    + over(
        "advance_checkpoint",
        "def advance_checkpoint(conn, tenant, source, expected_cursor, next_cursor):\n"
        "    _laid_put(conn, tenant, source, expected_cursor, under)\n"
        "    return under(conn, tenant, source, expected_cursor, next_cursor)\n",
    )
    + _page(
        "    put = lambda real: _laid_put(real, tenant, source, expected_cursor, _laid_cas)\n"
        "    return laid_page(_LaidConnection(conn, before_checkpoint=put))\n"
    )
)

_LOSER_KEEPS = _CONNECTION + _page(
    "    # A ROLLBACK the page asks for in its ordinary course (no exception on its way: the\n"
    "    # compare-and-set missed) commits instead; one on an error still rolls back.\n"
    "    return laid_page(_LaidConnection(conn, keep_losers=True))\n"
)


def _replaces_stored(when: str) -> str:
    """An `upsert_item` that first deletes the stored row when `when` holds of its version
    (``stored``) and the item's: the learner's upsert then writes the item as new."""
    return over(
        "upsert_item",
        "def upsert_item(conn, tenant, source, item):\n"
        "    key = (tenant, source, item['id'])\n"
        "    row = conn.execute('SELECT version FROM items WHERE tenant = ? AND source = ?"
        " AND item_id = ?', key).fetchone()\n"
        f"    if row is not None and {when}:\n"
        "        conn.execute('DELETE FROM items WHERE tenant = ? AND source = ? AND item_id = ?',"
        " key)\n"
        "    return under(conn, tenant, source, item)\n",
    )


_ACCUMULATES = (
    _CONNECTION
    + "_laid_applied = [0]\n"
    + over(
        "upsert_item",
        "def upsert_item(conn, tenant, source, item):\n"
        "    said = under(conn, tenant, source, item)\n"
        "    if said == 'applied':\n"
        "        _laid_applied[0] += 1\n"
        "    return said\n",
    )
    + _page(
        "    before = [0]\n"
        "    def begun(real):\n"
        "        row = real.execute('SELECT item_count FROM checkpoints WHERE tenant = ?"
        " AND source = ?', (tenant, source)).fetchone()\n"
        "        before[0] = 0 if row is None else row[0]\n"
        "        _laid_applied[0] = 0\n"
        "    def committing(real):  # add the page's applied items instead of the recount\n"
        "        real.execute('UPDATE checkpoints SET item_count = ?"
        " WHERE tenant = ? AND source = ?', (before[0] + _laid_applied[0], tenant, source))\n"
        "    return laid_page(_LaidConnection(conn, after_begin=begun, before_commit=committing))\n"
    )
)

LAID_OVER: dict[str, LaidOver] = {
    bug.name: bug
    for bug in (
        LaidOver(
            "cas_dropped",
            "the checkpoint moves wherever it stood (no compare-and-set), so a replayed page"
            " advances it again",
            _CAS_DROPPED,
            "you deliver the same page twice with the same expected cursor and assert the"
            " second reports advanced False and the stored cursor",
        ),
        LaidOver(
            "loser_keeps_its_items",
            "a page whose compare-and-set misses keeps its items instead of rolling back",
            _LOSER_KEEPS,
            "the replayed (stale) page carries a change, a new item or a newer version, and"
            " you assert the store did not change",
        ),
        LaidOver(
            "equal_version_overwrites",
            "an item at the version already stored replaces the stored one",
            _replaces_stored("row[0] == item['version']"),
            "a later page carries the same id and version with another payload, and you"
            " assert the stored payload stayed",
        ),
        LaidOver(
            "every_write_counted_as_applied",
            "every valid item counts as applied, even one already stored at that version",
            over(
                "upsert_item",
                "def upsert_item(conn, tenant, source, item):\n"
                "    under(conn, tenant, source, item)\n"
                "    return 'applied'\n",
            ),
            "the same items come again under the next cursor and you assert they count as"
            " unchanged",
        ),
        LaidOver(
            "version_check_dropped",
            "an older version of an item overwrites a newer one",
            _replaces_stored("True"),
            "a stale worker delivers an older version of a stored item",
        ),
        LaidOver(
            "accumulate_instead_of_replace",
            "item_count adds the page's applied items instead of recounting, so a new version"
            " of a stored item counts as a new item",
            _ACCUMULATES,
            "a page carries a newer version of a stored item and you compare item_count with"
            " the rows stored",
        ),
    )
}

#: Rows come back in the order a query asks for, and in no order without ORDER BY: a store
#: may keep them in any. Here a connection that ingested a page answers every unordered
#: SELECT in reverse (SQLite's own switch: nothing is written), so a test that reads rows
#: unordered and expects one order fails here.
_ROWS_REORDERED = _page(
    "    conn.execute('PRAGMA reverse_unordered_selects = ON')  # writes nothing\n"
    "    return laid_page(conn)\n"
)

CONTRACT_VARIANTS: dict[str, tuple[LaidOver, ...]] = {
    "ingest_page": (
        LaidOver(
            "unordered_selects_reversed",
            "a SELECT without ORDER BY returns its rows in another order",
            _ROWS_REORDERED,
        ),
    ),
    "advance_checkpoint": (),
}

#: The seams with nothing changed, laid over every wheat and under every bug, so that each run
#: holds one layer of the same shape on each (see build 03's).
NEUTRAL: tuple[LaidOver, ...] = (
    LaidOver(
        "seams_as_they_are",
        "the seams as they are",
        _CONNECTION
        + over(
            "advance_checkpoint",
            "def advance_checkpoint(conn, tenant, source, expected_cursor, next_cursor):\n"
            "    return under(conn, tenant, source, expected_cursor, next_cursor)\n",
        )
        + over(
            "upsert_item",
            "def upsert_item(conn, tenant, source, item):\n"
            "    return under(conn, tenant, source, item)\n",
        )
        + _page("    return laid_page(_LaidConnection(conn))\n"),
    ),
)
