"""A second correct implementation ("wheat") of build 07's tested seams. Never shipped.

The grader appends this text after the export of solutions/07_build_replay_safe_batch.ipynb
(its setup and answer cells), so it redefines `read_checkpoint`, `advance_checkpoint`,
`poison_reason`, `upsert_item` and `ingest_page` in the same module namespace and uses the
setup cell's names (`sqlite3`, `Mapping`, `Sequence`, `Any`, `Literal`, `PageOutcome`,
`canonical_json`, the reasons and SQLite's integer bounds) and the reference's `open_store`
without importing them. It keeps the steps' contracts exactly (BEGIN IMMEDIATE, one
transaction per page, compare-and-set checkpoint, the same rowcounts and outcomes), written
differently (named parameters, other column orders and SQL text, a dict of counts, other
branch order): a learner test that pins code (byte code, constants, source text, SQL text,
function identity) rather than behaviour passes on the reference and fails here.
"""

_CHECKPOINT_OF = "SELECT cursor FROM checkpoints WHERE source = :source AND tenant = :tenant"
_FIRST_CHECKPOINT = (
    "INSERT INTO checkpoints (item_count, cursor, source, tenant)"
    " VALUES (0, :next, :source, :tenant) ON CONFLICT DO NOTHING"
)
_MOVE_CHECKPOINT = (
    "UPDATE checkpoints SET cursor = :next"
    " WHERE cursor = :expected AND source = :source AND tenant = :tenant"
)
_STORE_ITEM = (
    "INSERT INTO items (item_id, version, payload, tenant, source)"
    " VALUES (:item_id, :version, :payload, :tenant, :source)"
    " ON CONFLICT (tenant, source, item_id) DO UPDATE"
    " SET payload = excluded.payload, version = excluded.version"
    " WHERE items.version < excluded.version"
)
_NOTE_POISON = (
    "INSERT INTO failures (item_id, reason, seen_at, source, tenant)"
    " VALUES (:item_id, :reason, :seen_at, :source, :tenant) ON CONFLICT DO NOTHING"
)
_COUNT_ITEMS = (
    "UPDATE checkpoints SET item_count = ("
    "SELECT count(i.item_id) FROM items AS i"
    " WHERE i.source = checkpoints.source AND i.tenant = checkpoints.tenant"
    ") WHERE source = :source AND tenant = :tenant"
)
_ABSENT = object()


def read_checkpoint(conn: sqlite3.Connection, tenant: str, source: str) -> str | None:
    """The stored cursor of the tenant's source; None before its first checkpoint."""
    found = conn.execute(_CHECKPOINT_OF, {"tenant": tenant, "source": source}).fetchall()
    return found[0][0] if found else None


def advance_checkpoint(
    conn: sqlite3.Connection,
    tenant: str,
    source: str,
    expected_cursor: str | None,
    next_cursor: str,
) -> bool:
    """Compare-and-set the checkpoint from expected_cursor (None: no row yet) to next_cursor:
    True when it moved; False, with nothing changed, when it was anywhere else."""
    where = {
        "tenant": tenant,
        "source": source,
        "expected": expected_cursor,
        "next": next_cursor,
    }
    statement = _MOVE_CHECKPOINT if expected_cursor is not None else _FIRST_CHECKPOINT
    return conn.execute(statement, where).rowcount > 0


def poison_reason(item: Any) -> str | None:
    """The first rule `item` breaks that no retry can mend (MISSING_ID, BAD_VERSION,
    NOT_CANONICAL), or None when it can be stored."""
    identity = item.get("id") if isinstance(item, Mapping) else None
    if not (isinstance(identity, str) and identity):
        return MISSING_ID
    version = item.get("version")
    if not (type(version) is int and SQLITE_MIN_INT <= version <= SQLITE_MAX_INT):
        return BAD_VERSION
    payload = item.get("payload", _ABSENT)
    if payload is _ABSENT:
        return NOT_CANONICAL
    try:
        canonical_json(payload)
    except (RecursionError, ValueError, TypeError):
        return NOT_CANONICAL
    else:
        return None


def upsert_item(
    conn: sqlite3.Connection, tenant: str, source: str, item: Mapping[str, Any]
) -> Literal["applied", "unchanged"]:
    """Insert the item, or replace its row when its version is strictly higher: "applied";
    else nothing is written: "unchanged"."""
    row = {
        "payload": canonical_json(item["payload"]),
        "version": item["version"],
        "item_id": item["id"],
        "source": source,
        "tenant": tenant,
    }
    changed = conn.execute(_STORE_ITEM, row).rowcount
    return "unchanged" if changed == 0 else "applied"


def ingest_page(
    conn: sqlite3.Connection,
    *,
    tenant: str,
    source: str,
    items: Sequence[Any],
    expected_cursor: str | None,
    next_cursor: str,
) -> PageOutcome:
    """Store one page and move the checkpoint past it by compare-and-set, in one
    BEGIN IMMEDIATE transaction. A repeat (the checkpoint is elsewhere) writes nothing and
    gives PageOutcome(0, 0, 0, False, <the stored cursor>); a poison item is recorded in
    failures and counted as rejected; any exception rolls the page back and propagates."""
    counts = {"applied": 0, "unchanged": 0, "rejected": 0}
    conn.execute("BEGIN IMMEDIATE")  # the write lock now, before the checkpoint is compared
    try:
        for position, item in enumerate(items):
            reason = poison_reason(item)
            if reason is None:
                counts[upsert_item(conn, tenant, source, item)] += 1
                continue
            named = item["id"] if reason != MISSING_ID else f"{expected_cursor}#{position}"
            failure = {
                "tenant": tenant,
                "source": source,
                "item_id": named,
                "reason": reason,
                "seen_at": expected_cursor,
            }
            conn.execute(_NOTE_POISON, failure)
            counts["rejected"] += 1
        if advance_checkpoint(conn, tenant, source, expected_cursor, next_cursor):
            conn.execute(_COUNT_ITEMS, {"tenant": tenant, "source": source})
            conn.execute("COMMIT")
            return PageOutcome(
                applied=counts["applied"],
                unchanged=counts["unchanged"],
                rejected=counts["rejected"],
                advanced=True,
                cursor=next_cursor,
            )
        stored = read_checkpoint(conn, tenant, source)  # still under our lock
        conn.execute("ROLLBACK")
        return PageOutcome(applied=0, unchanged=0, rejected=0, advanced=False, cursor=stored)
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already
            conn.execute("ROLLBACK")
        raise
