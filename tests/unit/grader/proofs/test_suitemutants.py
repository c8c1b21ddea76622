"""`grader.proofs.suitemutants`: the generic mutation run of the hidden suites.

The mutants are placed back into the export cell by cell (each marker's line count true, so
the kernel's cell-by-cell run is kept), named by ids that outlive unrelated edits, and the
survivors come out as ``[[equivalent]]`` tables that load once someone writes the reason.

The generic mutants recorded as equivalent (``[[equivalent]]`` in a build's
``mutants.toml``) behave exactly like the solution: proven here where a test can.

`grader.proofs.suitemutants` grades every mutant the ast mutator makes of a solution; a survivor is
killed by a new hidden test or recorded as equivalent with a reason. These tests hold each
record to account without grading anything: the record still names a mutant the mutator makes
today (same id, same diff), and that mutant, loaded beside the solution, gives the same
outcome (a value, or an exception's class: messages are not the spec) on a battery of inputs
chosen to reach the line it changed. Running them twice gives the same verdicts.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import cache, partial
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from builds.build07.visible.interrupts import nested
from etl.server import IN_PROCESS_BASE_URL, LAUNCHES_PATH, Fault, FixtureApp, http_date
from grader.proofs import suite_validity as validity
from grader.proofs.suitemutants import (
    CellMutant,
    SuiteScore,
    equivalent_tables,
    generate,
    stable_id,
)
from grader.suites.loading import Equivalent, SuiteError, load_equivalents, load_suite
from workbook import vtime
from workbook.shared.export import export_source, exported_sections, run_exported
from workbook.shared.manifest import load_manifest
from workbook.shared.modules import fresh_module, registered


def solution_text(build: str) -> str:
    entry = load_manifest().entry(build)
    assert entry.solution
    return export_source(load_manifest().root / entry.solution)


def test_every_mutant_keeps_the_cells_apart() -> None:
    """A mutated cell's marker gives its new line count: the export still runs cell by cell."""
    text = solution_text("03")
    cells = len(exported_sections(text))
    made = generate(text)
    assert len(made) > 100
    for item in made:
        assert len(exported_sections(item.source)) == cells, item.where
        assert item.source != text


def test_ids_are_unique_and_outlive_an_unrelated_edit() -> None:
    """Editing one function renames no mutant of another: ids come from the diff, not from
    the mutant's place in the list."""
    text = solution_text("03")
    before = {item.id: item.mutant.diff for item in generate(text)}
    assert len(before) == len(generate(text))
    edited = text.replace(
        "    return rng.uniform(0.0, ceiling)",
        "    drawn = rng.uniform(0.0, ceiling)\n    return drawn",
    )
    assert edited != text
    after = {item.id: item.mutant.diff for item in generate(edited)}
    untouched = {i: d for i, d in before.items() if "uniform" not in d and "drawn" not in d}
    assert untouched and all(after.get(i) == d for i, d in untouched.items())
    assert stable_id("delete", "-x\n+pass") == stable_id("delete", "-x\n+pass")
    assert stable_id("delete", "-x\n+pass") != stable_id("constant", "-x\n+pass")


def test_survivors_come_out_as_tables_that_load_once_explained(tmp_path: Path) -> None:
    made = generate(solution_text("08"))[:3]
    report = SuiteScore(build="08", generated=3, survivors=list(made))
    path = tmp_path / "mutants.toml"
    path.write_text(equivalent_tables(report), encoding="utf-8")
    with pytest.raises(SuiteError, match="no reason"):
        load_equivalents(path)
    path.write_text(equivalent_tables(report).replace('why = ""', 'why = "same"'), "utf-8")
    loaded = load_equivalents(path)
    assert [(e.id, e.diff) for e in loaded] == [(m.id, m.mutant.diff) for m in made]


def test_an_id_recorded_twice_is_refused(tmp_path: Path) -> None:
    table = '[[equivalent]]\nid = "delete:1"\ndiff = "-x"\nwhy = "y"\n'
    path = tmp_path / "mutants.toml"
    path.write_text(table + "\n" + table, encoding="utf-8")
    with pytest.raises(SuiteError, match="twice"):
        load_equivalents(path)


@pytest.mark.slow
def test_validity_mutate_grades_the_generic_mutants(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m grader.validity --mutate 08``: the quiz's every mutant graded, and killed."""
    assert validity.main(["--mutate", "08", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "build 08:" in out and "0 survived" in out


# ───────────────────────────────────────────── the recorded equivalents hold


BUILDS = ("03", "05", "07", "08")
_fresh = itertools.count(1)


@cache
def solution(build: str) -> tuple[Path, str]:
    entry = load_manifest().entry(build)
    assert entry.solution
    path = load_manifest().root / entry.solution
    return path, export_source(path)


@cache
def generated(build: str) -> dict[str, CellMutant]:
    return {item.id: item for item in generate(solution(build)[1])}


def recorded(build: str) -> tuple[Equivalent, ...]:
    return load_suite(build).equivalents


def load_text(build: str, text: str) -> ModuleType:
    """Exported text run as a module the way `workbook.load` runs a notebook: its siblings
    (05 loads 03) found beside the solution notebook."""
    path, _ = solution(build)
    module = fresh_module(f"equivalent_{build}_{next(_fresh)}", f"{path}#variant")
    module.__dict__["__notebook__"] = str(path)
    with registered(module):
        run_exported(module, text, str(module.__file__))
    return module


def outcome(call: Callable[[], Any]) -> str:
    """What a call did: its value's repr, or the class of what it raised (never its words)."""
    try:
        return repr(call())
    except BaseException as exc:  # KeyboardInterrupt included: a mutant may turn one into another
        return f"raised {type(exc).__name__}"


def cases(build: str) -> Iterator[tuple[Equivalent, CellMutant]]:
    for record in recorded(build):
        yield record, generated(build)[record.id]


@pytest.mark.slow
@pytest.mark.parametrize("build", BUILDS)
def test_every_record_names_a_mutant_made_today(build: str) -> None:
    """An id the mutator no longer makes is a record of nothing (the line was edited): the
    survivor it stood for is judged again, so the record must go."""
    made = generated(build)
    for record in recorded(build):
        assert record.id in made, f"build {build}: {record.id} matches no mutant now"
        assert record.diff == made[record.id].mutant.diff, f"build {build}: {record.id}"
        assert record.why.strip()


# ─────────────────────────────────────────────────────────────── batteries, per build


def battery03(m: ModuleType) -> list[str]:
    rng = random.Random(3)
    seen = []
    bad = (
        {"max_attempts": 0},
        {"max_attempts": -3},
        {"base_delay": -1.0},
        {"base_delay": math.nan},
        {"max_delay": math.inf},
        {"base_delay": 2.0, "max_delay": 1.0},
        {"jitter": "partial"},
        {"jitter": ""},
        {"jitter": "full"},
        {},
    )
    seen += [outcome(lambda kw=kw: m.RetryPolicy(**kw)) for kw in bad]
    policies = [m.RetryPolicy()]
    for _ in range(60):
        base = rng.choice([0.0, 0.001, 0.2, 1.0, rng.uniform(0, 5)])
        policies.append(m.RetryPolicy(base_delay=base, max_delay=base + rng.uniform(0, 20)))
    attempts = [*range(-2, 70), 1023, 1024, 1025, 1100, 5000, 10**5, 2.5]
    for policy, attempt in itertools.product(policies, attempts):
        seen.append(outcome(lambda p=policy, a=attempt: m.backoff_delay(p, a)))
    jittered = m.RetryPolicy(base_delay=1.0, max_delay=8.0, jitter="full")
    seen += [outcome(lambda n=n: m.backoff_delay(jittered, n, random.Random(n))) for n in (1, 5)]
    rows: list[Any] = [m.Row("ISS", 420.0), m.Row("nan", math.nan), m.Row("inf", -math.inf)]
    rows += [m.Row("set", {1, 2}), m.Row("bytes", b"x"), m.Row("keys", {1: "a", "b": 2})]
    rows += [m.Row("deep", nested(depth)) for depth in (10, 200, 300, 400, 480, 600, 2000)]
    seen += [outcome(lambda r=row: m.content_key(r)) for row in rows]
    return seen


NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
LISTING = IN_PROCESS_BASE_URL + LAUNCHES_PATH


def battery05(m: ModuleType, folder: Path) -> list[str]:
    seen = []
    values: list[str | None] = [None, "120", " 15 ", "0", "²", "-5", "1.5", "", "soon", "NaN"]
    nows = (NOW, NOW.replace(tzinfo=None), NOW.astimezone(timezone(timedelta(hours=5))))
    for offset, form in itertools.product((-86_400, -1, 0, 1, 30, 10**6), ("imf", "rfc850")):
        values.append(http_date(NOW + timedelta(seconds=offset), form))
    values.append(http_date(NOW + timedelta(seconds=45), "asctime"))
    for value, now in itertools.product(values, nows):
        seen.append(outcome(lambda v=value, n=now: m.parse_retry_after(v, n)))
    page = {"count": 1, "next": None, "results": []}
    responses = [
        (200, {}, json.dumps(page)),
        (204, {}, json.dumps({**page, "next": LISTING})),
        (200, {}, "{not json"),
        (200, {}, "[1, 2]"),
        (200, {}, b"\xff\xfe"),
        (429, {"Retry-After": "5"}, ""),
        (429, {}, ""),
        (503, {"Retry-After": http_date(NOW + timedelta(seconds=30))}, ""),
        (500, {}, ""),
        (404, {"Retry-After": "5"}, ""),
        (501, {}, ""),
        (300, {}, json.dumps(page)),
    ]
    for status, headers, body in responses:
        response = httpx.Response(status, headers=headers, content=body)
        seen.append(outcome(lambda r=response: error_fields(m.error_for_response(r, NOW))))
    scripts: list[dict[int, Any]] = [{}, {10: Fault.next_to(0)}, {0: Fault.hang()}]
    scripts += [{10: Fault.bad_json()}, {10: Fault.error(404)}, {0: Fault.unavailable(3)}]
    for script in scripts:
        seen.append(outcome(lambda s=script: vtime.run(read_all(m, s), deadline=10**5)))
    for number, kind in enumerate((str, Path)):
        path = kind(folder / f"launches-{number}.jsonl")
        for _ in range(2):
            seen.append(outcome(lambda p=path: vtime.run(ingest_once(m, p), deadline=10**5)))
    return seen


def error_fields(error: Any) -> Any:
    if error is None:
        return None
    return (type(error).__name__, getattr(error, "status", None), error.retry_after())


async def read_all(m: ModuleType, script: dict[int, Any]) -> list[str]:
    app = FixtureApp(script)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=IN_PROCESS_BASE_URL
    ) as client:
        source = m.SpaceDevsSource(client, LISTING + "?limit=10", page_timeout=5.0)
        return [launch.id async for launch in source.launches()]


async def ingest_once(m: ModuleType, path: str | Path) -> Any:
    app = FixtureApp()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=IN_PROCESS_BASE_URL
    ) as client:
        report = await m.ingest(m.SpaceDevsSource(client, LISTING + "?limit=50"), path)
    return (report, Path(path).read_text(encoding="utf-8").count("\n"))


def battery07(m: ModuleType, folder: Path) -> list[str]:
    seen = []
    items: list[Any] = [
        {"id": "a", "version": 1, "payload": {"x": 1}},
        {"id": "a", "version": 2, "payload": {"x": 2}},
        {"id": "a", "version": 1, "payload": {"x": 3}},
        {"id": "", "version": 1, "payload": {}},
        {"version": 1, "payload": {}},
        ["not", "a", "mapping"],
        {"id": "b", "version": True, "payload": {}},
        {"id": "b", "version": 2**63, "payload": {}},
        {"id": "c", "version": 1},
        {"id": "c", "version": 1, "payload": {"lat": math.nan}},
        {"id": "c", "version": 1, "payload": nested(5_000)},
        {"id": "d", "version": 1, "payload": None},
    ]
    seen += [outcome(lambda i=item: m.poison_reason(i)) for item in items]
    folder.mkdir(parents=True)
    conn = m.open_store(folder / "store.db")
    try:
        good = [i for i in items if m.poison_reason(i) is None]
        seen += [outcome(lambda i=item: m.upsert_item(conn, "t", "s", i)) for item in good]
        for expected, nxt in ((None, "c1"), ("c1", "c2"), (None, "c1"), ("c2", "c3")):
            page = partial(
                m.ingest_page,
                conn,
                tenant="t",
                source="p",
                items=items,
                expected_cursor=expected,
                next_cursor=nxt,
            )
            seen.append(outcome(page))
        seen.append(repr(conn.execute("SELECT * FROM items ORDER BY 1, 2, 3").fetchall()))
        seen.append(repr(conn.execute("SELECT * FROM failures ORDER BY 1, 2, 3").fetchall()))
        seen.append(repr(conn.execute("SELECT * FROM checkpoints").fetchall()))
    finally:
        conn.close()
    return seen


@dataclass(frozen=True)
class Battery:
    run: Callable[[ModuleType, Path], list[str]]


BATTERIES: dict[str, Battery] = {
    "03": Battery(lambda m, _folder: battery03(m)),
    "05": Battery(battery05),
    "07": Battery(battery07),
}


@pytest.mark.slow
@pytest.mark.parametrize("build", sorted(BATTERIES))
def test_equivalents_behave_like_the_solution(build: str, tmp_path: Path) -> None:
    """Each recorded equivalent, loaded beside the solution, gives the same outcome on every
    input of the build's battery (and the battery reaches the lines they change: a mutant of
    the same lines that is not equivalent gives another)."""
    battery = BATTERIES[build]
    _, text = solution(build)
    want = battery.run(load_text(build, text), tmp_path / "solution")
    assert want, "an empty battery proves nothing"
    for record, item in cases(build):
        folder = tmp_path / record.id.replace(":", "-")
        got = battery.run(load_text(build, item.source), folder)
        differ = [n for n, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
        assert not differ, f"{record.id}: input #{differ[0]}: {got[differ[0]]} vs {want[differ[0]]}"


def test_the_battery_tells_a_real_bug_apart() -> None:
    """The 03 battery is not blind: a cap that is not applied changes what it sees, while a
    recorded equivalent of the same line does not."""
    _, text = solution("03")
    line = "ceiling = float(min(policy.base_delay * 2 ** (attempt - 1), policy.max_delay))"
    broken = text.replace(line, line.replace("policy.max_delay)", "policy.max_delay * 1e9)"))
    assert broken != text
    assert battery03(load_text("03", broken)) != battery03(load_text("03", text))
