"""`grader.suites.judging.Observed.database`: a kept SQLite store is read as SQLite itself would
open it after the worker ended, whatever journal mode and state its file was left in, so honest work
never loses a point for how its file was left (issue 25, item 3)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.suites.judging import Observed
from grader.suites.observe import JSON, keep

ROWS = [(n,) for n in range(1, 301)]


def committed(db: Path, mode: str) -> sqlite3.Connection:
    """A store in journal mode `mode` holding `ROWS`, committed; its writer left open."""
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute(f"PRAGMA journal_mode={mode}")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x)")
    writer.execute("BEGIN")
    writer.executemany("INSERT INTO t VALUES (?)", ROWS)
    writer.execute("COMMIT")
    return writer


def read_back(tmp_path: Path, ref: JSON) -> list[tuple[int]]:
    with Observed({}, artefacts=tmp_path).database(ref) as read:
        assert read is not None
        rows: list[tuple[int]] = read.execute("SELECT x FROM t ORDER BY x").fetchall()
        with pytest.raises(sqlite3.OperationalError):
            read.execute("INSERT INTO t VALUES (0)")  # query-only, whichever way it was read
        return rows


def left_closed(writer: sqlite3.Connection) -> None:
    writer.close()


def left_open(writer: sqlite3.Connection) -> None:
    pass


def checkpointed_open(writer: sqlite3.Connection) -> None:
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")


STATES: dict[str, Callable[[sqlite3.Connection], None]] = {
    "closed": left_closed,
    "open": left_open,
    "checkpointed, open": checkpointed_open,
}


@pytest.mark.parametrize("mode", ["DELETE", "TRUNCATE", "PERSIST", "WAL"])
@pytest.mark.parametrize("state", list(STATES))
def test_every_journal_mode_and_state_reads_back_every_committed_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, state: str
) -> None:
    monkeypatch.chdir(tmp_path)  # a probe keeps files in its working directory
    db = tmp_path / "made.sqlite"
    writer = committed(db, mode)
    STATES[state](writer)
    ref = keep(db, "kept.store")
    writer.close()
    assert read_back(tmp_path, ref) == ROWS


def test_a_wal_store_closed_cleanly_has_no_wal_and_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The case that lost 6 of 56 points: a WAL-mode header, nothing beside it.
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "made.sqlite"
    committed(db, "WAL").close()
    ref = keep(db, "kept.store")
    assert db.read_bytes()[18:20] == b"\x02\x02" and ref["files"] == {"": True}
    assert read_back(tmp_path, ref) == ROWS


def test_a_hot_journal_left_by_a_kill_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "made.sqlite"
    writer = committed(db, "DELETE")
    writer.execute("PRAGMA cache_size=1")  # spill: the main file holds uncommitted pages
    writer.execute("BEGIN")
    writer.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(1000, 3000)])
    writer.execute("DELETE FROM t WHERE x < 100")
    ref = keep(db, "kept.store")  # as a kill leaves it: mid-transaction, journal hot
    writer.execute("ROLLBACK")
    writer.close()
    assert ref["files"]["-journal"] is True
    assert read_back(tmp_path, ref) == ROWS  # what was committed, and only that


def test_a_kept_jsonl_file_is_read_as_a_restart_reads_it(tmp_path: Path) -> None:
    from builds.build05.hidden.expected import kept_ids

    def ids(data: bytes) -> list[JSON]:
        (tmp_path / "run.jsonl").write_bytes(data)
        return kept_ids(Observed({}, artefacts=tmp_path), {"file": {"artefact": "run.jsonl"}})

    whole = b'{"id": "a"}\n\n{"id": "b"}\n'
    assert ids(whole) == ["a", "b"]  # complete lines count; a blank one is no row
    assert ids(whole + b'{"id": "c"') == ["a", "b"]  # torn: never a row counted
    assert ids(whole + b'{"id": "c"}') == ["a", "b", "c"]  # unterminated, whole: a restart reads it
    assert ids(b'{"id": "a"}\nnot json\n') == ["a", {"bad": "not json"}]  # not a crash's doing
