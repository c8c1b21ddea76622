"""The grading machinery's parts, without a child process: mutants, observations, judging,
the report protocol and the exercise/solution structure check."""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import threading
import types
from collections.abc import Callable
from pathlib import Path

import pytest

import etl
from builds.build07.hidden.probes import item_text
from grader import Limits, Mutant, SuiteError
from grader.proofs.suite_validity import structure
from grader.runtime.protocol import Job
from grader.runtime.results import Outcome, ProbeRecord
from grader.runtime.stream import MAX_DEPTH, ResultStream
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
from grader.suites.loading import Edit, load_mutants
from grader.suites.observe import Probes, attempt, keep, plain, vrun
from workbook.shared.modules import execute, fresh_module

# ── mutants ────────────────────────────────────────────────────────────────────────────


def test_a_mutant_edits_exactly_once() -> None:
    mutant = Mutant("m", "bug", (Edit("return 1", "return 2"), Edit("a = 0", "a = 1")))
    assert mutant.apply("a = 0\ndef f():\n    return 1\n") == "a = 1\ndef f():\n    return 2\n"


@pytest.mark.parametrize(
    ("source", "words"),
    [("def f():\n    return 3\n", "not found"), ("return 1\nreturn 1", "2 times")],
)
def test_a_mutant_that_no_longer_applies_fails_loudly(source: str, words: str) -> None:
    with pytest.raises(SuiteError, match=words):
        Mutant("m", "bug", (Edit("return 1", "return 2"),)).apply(source)


def test_mutants_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mutants.toml"
    path.write_text('[[mutant]]\nname = "x"\nbug = "y"\n')
    with pytest.raises(SuiteError, match="mutant #1: missing 'edit'"):
        load_mutants(path)
    twice = '[[mutant]]\nname = "x"\nbug = "y"\n[[mutant.edit]]\nold = "a"\nnew = "b"\n'
    path.write_text(twice * 2)
    with pytest.raises(SuiteError, match="appears twice"):
        load_mutants(path)
    assert load_mutants(tmp_path / "absent.toml") == ()


# ── observations ───────────────────────────────────────────────────────────────────────


class LyingStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def test_plain_keeps_exact_json_types_and_tags_the_rest() -> None:
    assert plain([1, 1.5, True, None, "x", (2, 3), {"k": [4]}]) == [
        1,
        1.5,
        True,
        None,
        "x",
        [2, 3],
        {"k": [4]},
    ]
    assert plain(math.nan) == {"float": "nan"}
    assert plain(-math.inf) == {"float": "-inf"}
    lying = plain(LyingStr("abc"))
    assert lying == {"type": "LyingStr", "repr": "'abc'"}
    assert plain({1: "x"})["type"] == "dict"  # keys JSON cannot hold


def test_plain_survives_a_repr_that_raises() -> None:
    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert plain(Bad()) == {
        "type": "test_plain_survives_a_repr_that_raises.<locals>.Bad",
        "repr": "<test_plain_survives_a_repr_that_raises.<locals>.Bad (its repr raised)>",
    }


def test_attempt_reports_exceptions_by_name_and_missing_names() -> None:
    assert attempt(lambda: 1 / 0) == {
        "raised": "ZeroDivisionError",
        "message": "division by zero",
        "is": [],
    }
    assert attempt(lambda: 42) == {"ok": 42}

    def exits() -> None:
        raise SystemExit(3)

    assert attempt(exits)["raised"] == "SystemExit"


def test_vrun_reports_virtual_time_and_blocking_sleeps() -> None:
    import asyncio

    async def waits(clock: object) -> str:
        await asyncio.sleep(5)
        return "done"

    seen = vrun(waits)
    assert seen.pop("vrun") is None  # no ledger outside a grading worker (grader.classes.ledger)
    assert (seen["ok"], seen["elapsed"], seen["blocking"]) == ("done", 5.0, 0.0)
    assert seen["real"] < 1.0

    async def forever(clock: object) -> None:
        while True:
            await asyncio.sleep(60)

    stopped = vrun(forever, deadline=600)
    assert stopped.pop("real") < 1.0
    stopped.pop("vrun")
    assert stopped == {
        "raised": "VirtualDeadline",
        "message": "still running after 600 s",
        "elapsed": 600.0,
        "blocking": 0.0,
    }


# ── judging ────────────────────────────────────────────────────────────────────────────


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


# ── the report protocol ────────────────────────────────────────────────────────────────


def test_a_job_survives_the_trip_to_the_fork_server() -> None:
    job = Job(
        suite="/s/probes.py",
        module="_hidden_probes_s",
        digest="0" * 64,
        probes=("a", "b"),
        build="03",
        limits=Limits().as_json(),
    )
    assert Job.from_json(job.to_json()) == job


def job(*events: dict[str, object]) -> ResultStream:
    j = ResultStream(["a", "b"], "", Limits(), "")
    for event in events:
        j.feed(json.dumps(event).encode(), now=0.0)
    return j


LOADED = {"event": "loaded"}


def start(name: str) -> dict[str, object]:
    return {"event": "start", "probe": name}


def done(name: str, value: object = 1) -> dict[str, object]:
    return {"event": "done", "probe": name, "obs": {"ok": value}}


def test_the_honest_sequence_is_accepted() -> None:
    j = job(LOADED, start("a"), done("a"), start("b"), done("b", 2), {"event": "end"})
    j.settle()
    assert {n: (r.status, r.obs) for n, r in j.records.items()} == {
        "a": ("done", {"ok": 1}),
        "b": ("done", {"ok": 2}),
    }


@pytest.mark.parametrize(
    "events",
    [
        # a forged report for b, then b's real one
        (LOADED, start("a"), done("a"), start("b"), done("b", 9), done("b", 2)),
        # a forged report and a forged start of the next probe
        (LOADED, start("a"), done("a"), start("b"), done("b", 9), start("a")),
        # a report before anything loaded
        (done("a"),),
        # probes out of order
        (LOADED, start("b")),
    ],
)
def test_any_deviation_voids_every_report_of_the_worker(
    events: tuple[dict[str, object], ...],
) -> None:
    j = job(*events)
    j.settle()
    assert j.deviation is not None
    assert all(r.status == "void" for r in j.records.values())


def nested(levels: int) -> object:
    """A list nested `levels` deep, with an empty dict and a scalar beside it at each level."""
    value: object = []
    for _ in range(levels - 1):
        value = [{}, 1, value]
    return value


@pytest.mark.parametrize("levels", [61, 62, 63, 200])
def test_a_report_may_nest_as_deep_as_the_limit_and_no_deeper(levels: int) -> None:
    # Its own dict and "obs" dict are two levels and the value the rest.
    j = job(LOADED, start("a"), done("a", nested(levels)))
    assert (j.deviation is None) == (levels + 2 <= MAX_DEPTH), levels


def test_an_unconfirmed_last_report_is_void() -> None:
    j = job(LOADED, start("a"), done("a"), start("b"), done("b", 2))  # then the worker died
    j.settle()
    assert (j.records["a"].status, j.records["b"].status) == ("done", "void")


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


def test_a_report_split_between_the_watch_and_the_drain_is_read_whole() -> None:
    """A report longer than the pipe's buffer arrives in pieces; the worker's end may come
    between them. The half read before must join the half the drain reads."""
    j = ResultStream(["a"], "", Limits(), "")
    big = json.dumps(done("a", "x" * 200_000)).encode() + b"\n"
    head = b"\n".join(json.dumps(e).encode() for e in (LOADED, start("a"))) + b"\n"
    j.take(head + big[:70_000])
    read_end, write_end = os.pipe()

    def write_the_rest() -> None:  # more than the pipe holds: written while drain reads
        rest = big[70_000:] + json.dumps({"event": "end"}).encode() + b"\n"
        while rest:
            rest = rest[os.write(write_end, rest) :]
        os.close(write_end)

    writer = threading.Thread(target=write_the_rest)
    writer.start()
    j.drain(read_end)
    writer.join()
    os.close(read_end)
    j.settle()
    assert j.deviation is None
    assert j.records["a"].status == "done" and j.records["a"].obs == {"ok": "x" * 200_000}


def test_a_line_that_is_not_json_is_a_deviation() -> None:
    j = ResultStream(["a"], "", Limits(), "")
    j.feed(b"all tests passed!", now=0.0)
    assert j.deviation is not None


# ── exercise and solution structure ────────────────────────────────────────────────────

Make = Callable[..., Path]


def test_notebooks_that_differ_only_in_answers_have_the_same_structure(
    make_notebook: Make,
) -> None:
    exercise = make_notebook(
        ("md", "# Step"), ("answer", "raise NotImplementedError"), ("", "check()"), name="ex.ipynb"
    )
    solution = make_notebook(
        ("md", "# Step"), ("answer", "x = 1"), ("", "check()"), name="sol.ipynb"
    )
    line = structure(exercise, solution)
    assert line.ok, line.details
    assert "1 answer cells" in line.summary


@pytest.mark.parametrize(
    ("solution_cells", "words"),
    [
        ((("md", "# Step!"), ("answer", "x = 1"), ("", "check()")), "cell 1 (markdown) differs"),
        ((("md", "# Step"), ("setup", "x = 1"), ("", "check()")), "cell 2: tags"),
        ((("md", "# Step"), ("answer", "x = 1")), "3 cells in the exercise, 2 in the solution"),
        ((("md", "# Step"), ("answer", "x = 1"), ("", "check(1)")), "cell 3 (code) differs"),
    ],
)
def test_structure_drift_is_reported(
    make_notebook: Make, solution_cells: tuple[tuple[str, str], ...], words: str
) -> None:
    exercise = make_notebook(("md", "# Step"), ("answer", "pass"), ("", "check()"), name="ex.ipynb")
    solution = make_notebook(*solution_cells, name="sol.ipynb")
    line = structure(exercise, solution)
    assert not line.ok
    assert any(words in detail for detail in line.details), line.details


def test_an_item_is_shown_with_its_sets_sorted() -> None:
    # The judges' text of an item goes through the one stable repr (`workbook.checking.feedback`).
    item = {"id": "p-set", "payload": {"tags": {"kiwi", "fig", "yam", "pea"}}}
    assert item_text(item) == "{'id': 'p-set', 'payload': {'tags': {'fig', 'kiwi', 'pea', 'yam'}}}"
