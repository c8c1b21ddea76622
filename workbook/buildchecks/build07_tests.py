"""Build 07's test-writing steps: which seams each learner test tests, and the sabotage its
self-check (`workbook.teststep`) tries it on.

Each sabotage is seed 002's "remove the key" made concrete for one key of the capstone, written
around the learner's own functions (whatever their bodies), so that it is the same bug for
every learner: the compare of the checkpoint's compare-and-set, the version of the upsert, and
the one transaction of a page. Kept apart from `build07` (the visible checks) so that neither
module outgrows the house limit; this module ships to learners and holds no reference seam.
"""

from __future__ import annotations

from workbook.learnertests import Sabotage

#: Test-writing steps: the learner's test -> the seams it tests (the ones mutated).
LEARNER_TESTS: dict[str, tuple[str, ...]] = {
    "test_replay_reaches_a_fixed_point": ("ingest_page", "advance_checkpoint"),
    "test_state_machine_equals_one_clean_run": ("ingest_page",),
}
#: Mutants tried per test (instead of `workbook.learnertests.MAX_MUTANTS`), so that a step's
#: self-check answers within two seconds: a page test costs about 10 ms a mutant, a state
#: machine 60 ms. The first mutants are the deleted statements of each seam's top level, the
#: likeliest slips.
MAX_MUTANTS_OF: dict[str, int] = {
    "test_replay_reaches_a_fixed_point": 40,
    "test_state_machine_equals_one_clean_run": 12,
}

_PAGE_ARGS = (
    "conn, tenant=tenant, source=source, items=items, expected_cursor=expected_cursor,"
    " next_cursor=next_cursor"
)
_SIGNATURE = "def ingest_page(conn, *, tenant, source, items, expected_cursor, next_cursor):\n"

SABOTAGE = [
    Sabotage(
        "checkpoint_not_compared",
        "ingest_page moves the checkpoint wherever it stood (the compare of its"
        " compare-and-set removed), so a replayed page is written again",
        "_Compared = ingest_page\n"
        + _SIGNATURE
        + (
            "    # Put the checkpoint where this caller expects it: the compare always succeeds.\n"
            "    conn.execute('DELETE FROM checkpoints WHERE tenant = ? AND source = ?',"
            " (tenant, source))\n"
            "    if expected_cursor is not None:\n"
            "        conn.execute('INSERT INTO checkpoints (tenant, source, cursor, item_count)"
            " VALUES (?, ?, ?, 0)', (tenant, source, expected_cursor))\n"
            f"    return _Compared({_PAGE_ARGS})\n"
        ),
    ),
    Sabotage(
        "upsert_ignores_version",
        "upsert_item replaces the stored item whatever its version, so a stale worker's older"
        " copy overwrites a newer one",
        "_Newer = upsert_item\n"
        "def upsert_item(conn, tenant, source, item):\n"
        "    conn.execute('DELETE FROM items WHERE tenant = ? AND source = ? AND item_id = ?',"
        " (tenant, source, item['id']))\n"
        "    return _Newer(conn, tenant, source, item)\n",
    ),
    Sabotage(
        "checkpoint_before_items",
        "ingest_page commits the checkpoint before it writes the page's items, so a page that"
        " fails halfway is lost for good",
        "_OneTransaction = ingest_page\n"
        + _SIGNATURE
        + (
            "    try:\n"
            f"        return _OneTransaction({_PAGE_ARGS})\n"
            "    except BaseException:\n"
            "        # As though the checkpoint had committed on its own, before the items.\n"
            "        if not conn.in_transaction:\n"
            "            advance_checkpoint(conn, tenant, source, expected_cursor, next_cursor)\n"
            "        raise\n"
        ),
    ),
]

#: Which sabotage each test is tried on: the replay test's property holds whatever the version
#: check or a crash does, so only the state machine answers for those.
SABOTAGE_OF: dict[str, tuple[str, ...]] = {
    "test_replay_reaches_a_fixed_point": ("checkpoint_not_compared",),
    "test_state_machine_equals_one_clean_run": (
        "checkpoint_not_compared",
        "upsert_ignores_version",
        "checkpoint_before_items",
    ),
}
