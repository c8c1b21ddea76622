"""`grader.suites.judging`: judges pass only on positive evidence, values compare exactly
in type, exceptions by class; and `Observed.database`: a kept SQLite store is read as SQLite
itself would open it after the worker ended, whatever journal mode and state its file was
left in, so honest work never loses a point for how its file was left (issue 25, item 3)."""

from __future__ import annotations

import os
import random
import sqlite3
import types
from collections.abc import Callable
from pathlib import Path

import pytest

import etl
from grader.runtime.results import Outcome, ProbeRecord
from grader.suites.judging import (
    JSON,
    Fail,
    GraderFault,
    Judges,
    Observed,
    Verdict,
    equal,
    is_kind,
    judges_of,
    listed,
    ok,
    raises,
    same_value,
    verdict,
)
from grader.suites.observe import Probes, attempt, keep
from workbook.shared.modules import execute, fresh_module

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


@pytest.mark.parametrize(
    ("got", "expected", "same"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (True, 1, False),
        ("a", "a", True),
        ([1, 2.0], [1, 2.0], True),
        ([1, 2], [1, 2.0], False),
        ({"type": "LyingStr", "repr": "'a'"}, "a", False),
        (0.30000000000000004, 0.3, False),
    ],
)
def test_same_value_is_exact_in_type(got: object, expected: object, same: bool) -> None:
    assert same_value(got, expected) is same


def test_same_value_tolerance_is_for_floats_only() -> None:
    assert same_value(0.6000001, 0.6, tolerance=2e-6)
    assert not same_value(0.61, 0.6, tolerance=2e-6)


def test_a_judge_passes_only_on_positive_evidence() -> None:
    judges = Judges()

    @judges.add("t")
    def judge(obs: Observed) -> None:
        equal("f()", ok(obs("t"), "f()"), 2)

    def verdict_on(record: ProbeRecord) -> Verdict:
        return verdict(judges.by_name["t"], Observed({"t": record}))

    assert verdict_on(ProbeRecord("t", "done", {"ok": 2})) == (Outcome.PASSED, "")
    stub = verdict_on(ProbeRecord("t", "done", {"raised": "NotImplementedError"}))
    assert stub.kind is Outcome.NOT_DONE and stub.message.startswith("not done yet")
    wrong = verdict_on(ProbeRecord("t", "done", {"ok": 3}))
    assert wrong.kind is Outcome.WRONG and "got:      3" in wrong.message
    hang = verdict_on(ProbeRecord("t", "timeout", None, "timed out: x"))
    assert hang == (Outcome.UNFINISHED, "timed out: x")
    assert verdict_on(ProbeRecord("t", "void", None, "not graded: x")).kind is Outcome.VOID
    walls = ProbeRecord("t", "crashed", None, "grader error: x", grader_fault=True)
    assert verdict_on(walls) == (Outcome.GRADER_FAULT, "grader error: x")
    assert verdict(judges.by_name["t"], Observed({})) == (Outcome.UNFINISHED, "probe t did not run")
    with pytest.raises(Fail, match="expected: 2"):
        judge(Observed({"t": ProbeRecord("t", "done", {"ok": 3})}))


def test_grader_faults_are_the_grader_s_and_a_malformed_report_is_the_learner_s() -> None:
    judges = Judges()

    @judges.add("seed")
    def seed(obs: Observed) -> None:
        raise GraderFault("grader error: the fork servers could not start")

    @judges.add("misshapen")
    def misshapen(obs: Observed) -> None:
        obs("t")["missing key"]

    observed = Observed({"t": ProbeRecord("t", "done", {"ok": 1})})
    assert verdict(judges.by_name["seed"], observed).kind is Outcome.GRADER_FAULT
    # A report of another shape than the probe's was forged or changed by the learner's code,
    # which shares the probe's process: it is wrong, never a grader fault.
    crash = verdict(judges.by_name["misshapen"], observed)
    assert crash.kind is Outcome.WRONG
    assert crash.message.startswith("the probe's report is not in the shape the probe makes")
    with pytest.raises(ValueError, match="judge 'seed' declared twice"):
        judges.add("seed")(seed)


def test_the_judges_of_a_module_are_its_test_functions() -> None:
    module = types.ModuleType("judges")

    def test_b(observed: Observed) -> None:
        pass

    def test_a(observed: Observed) -> None:
        pass

    def helper(observed: Observed) -> None:
        pass

    module.__dict__.update(test_b=test_b, test_a=test_a, helper=helper)
    judges = judges_of(module)
    assert judges.names == ["b", "a"]
    assert judges.by_name["a"].fn is test_a


class ParseError(ValueError):
    """A learner's look-alike of etl.ParseError."""


def test_exceptions_are_judged_by_class_not_by_name() -> None:
    real, fake = attempt(lambda: _raise(etl.ParseError("x"))), attempt(lambda: _raise(ParseError()))
    assert real["is"] == ["EtlError", "ParseError"] and fake["is"] == ["ValueError"]
    assert is_kind(real, "ParseError") and not is_kind(fake, "ParseError")
    with pytest.raises(Fail, match=r"it is not etl\.ParseError"):
        raises(fake, "content_key(row)", "ParseError")
    assert is_kind(attempt(lambda: _raise(KeyError("k"))), "KeyError")


def _raise(exc: BaseException) -> None:
    raise exc


def test_lengths_are_checked_before_anything_in_them() -> None:
    assert listed([1, 2], 2, "f()") == [1, 2]
    for value in ([], [1], [1, 2, 3], {"ok": []}, None):
        with pytest.raises(Fail, match="2 draws, one per input"):
            listed(value, 2, "f()", "draws")


def test_seeded_inputs_are_drawn_again_in_the_parent() -> None:
    probes = Probes("salt")

    @probes.seeded("p")
    def probe(ns: types.ModuleType, rng: random.Random) -> JSON:
        return {"value": rng.random()}

    source = "x = 1\n"
    ns = fresh_module("submission", "/nowhere/submission.py")
    execute(ns, source, "/nowhere/submission.py")
    seen = probes.by_name["p"].fn(ns)
    observed = Observed({"p": ProbeRecord("p", "done", seen)}, source=source)
    got, rng = observed.seeded("p", probes)
    assert got["value"] == rng.random()  # the same inputs, drawn here
    other = Observed({"p": ProbeRecord("p", "done", seen)}, source="x = 2\n")
    with pytest.raises(Fail, match="an observation made with other inputs"):
        other.seeded("p", probes)
    assert probes.by_name["p"].fn(fresh_module("gone"))["seed"] == "unreadable"


def test_kept_files_are_read_by_the_parent_and_never_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a probe keeps files in its working directory
    db = tmp_path / "made.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (42)")
    conn.close()
    ref = keep(db, "probe.store")
    assert Observed({}).artefact(ref) is None  # no runner's copy: nothing the child says counts
    with Observed({}, artefacts=tmp_path).database(ref) as read:
        assert read is not None and read.execute("SELECT x FROM t").fetchall() == [(42,)]
        with pytest.raises(sqlite3.OperationalError):
            read.execute("INSERT INTO t VALUES (1)")  # read-only
    copied = Observed({}, artefacts=tmp_path)
    assert copied.artefact(ref) == db.read_bytes()
    (tmp_path / "linked").symlink_to(db)
    assert copied.artefact({"artefact": "linked"}) is None
    os.mkfifo(tmp_path / "fifo")
    assert copied.artefact({"artefact": "fifo"}) is None
    assert copied.artefact({"artefact": "../made.sqlite"}) is None
    assert keep(tmp_path / "absent", "x") == {"artefact": "x", "files": {"": None}}


def test_a_kept_store_is_read_with_its_wal_and_a_corrupt_one_fails_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "wal.sqlite"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x)")
    writer.execute("INSERT INTO t VALUES (7)")  # in the WAL only, the writer still open
    ref = keep(db, "wal.store")
    writer.close()
    assert ref["files"]["-wal"] is True
    with Observed({}, artefacts=tmp_path).database(ref) as read:
        assert read is not None and read.execute("SELECT x FROM t").fetchall() == [(7,)]
    (tmp_path / "bad.store").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with Observed({}, artefacts=tmp_path).database({"artefact": "bad.store"}) as read:
        assert read is not None
        with pytest.raises(sqlite3.DatabaseError):
            read.execute("SELECT * FROM sqlite_master").fetchall()
