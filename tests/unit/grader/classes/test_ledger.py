"""`grader.classes.ledger`: virtual time as the parent counts it, from ticks the child cannot take
back."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest

from grader.classes import ledger
from grader.runtime.protocol import Event, Limits
from grader.runtime.stream import ResultStream
from workbook.vtime import Clock, drive


def ticks(*items: tuple[str, float] | tuple[str, float, Any]) -> list[ledger.Tick]:
    return [(item[0], float(item[1]), item[2] if len(item) > 2 else None) for item in items]


def no_file(ref: Any) -> bytes | None:
    return None


def test_time_is_the_sum_of_the_waits_since_run() -> None:
    runs = ledger.runs(
        ticks(
            ("wait", 9.0),  # before any run: no part of one
            ("run", 0),
            ("call", 0),
            ("wait", 0.5),
            ("call", 0),
            ("block", 2.0),
            ("wait", 1.0),
            ("end", 0),
            ("wait", 30.0),  # the loop closing: no part of the run
            ("run", 0),
            ("at", 0),
        )
    )
    assert [r.calls for r in runs] == [[0.0, 0.5], []]
    assert [r.elapsed for r in runs] == [1.5, None]  # the second never ended
    assert runs[0].blocking == 2.0 and runs[1].at == [0.0]


def test_the_child_s_times_are_replaced_and_a_report_without_its_run_believes_nothing() -> None:
    runs = ticks(("run", 0), ("call", 0), ("wait", 2.0), ("call", 0), ("end", 0))
    claimed = {
        "outer": {"vrun": 0, "times": [0.0, 0.0], "calls": 2, "elapsed": 0.0, "ok": {"at": 0.0}},
        "stray": {"elapsed": 0.0, "times": [1.0], "blocking": 0.0},
        "forged_index": {"vrun": "0", "elapsed": 2.0},
    }
    seen = ledger.apply(claimed, runs, no_file)
    assert seen["outer"] == {
        "vrun": 0,
        "times": [0.0, 2.0],
        "calls": 2,
        "elapsed": 2.0,
        "ok": {"at": None},  # inherits the run: no "at" tick was written
    }
    assert seen["stray"] == {"elapsed": None, "times": None, "blocking": None}
    assert seen["forged_index"] == {"vrun": None, "elapsed": None}
    assert claimed["outer"]["times"] == [0.0, 0.0]  # the record itself is never changed
    assert ledger.apply(seen, runs, no_file) == seen


def test_each_run_of_the_ledger_is_named_once_by_the_report() -> None:
    """A forged ``end`` then ``run`` closes the real run early and opens one nobody names,
    to soak up a wait: the report must name every run once, or nothing in it counts."""
    phantom = ticks(("run", 0), ("call", 0), ("end", 0), ("run", 0), ("wait", 4.0), ("end", 0))
    void = {"void": "the report does not name each run of its ledger once"}
    assert ledger.apply({"vrun": 0, "elapsed": 0.0}, phantom, no_file) == void
    assert ledger.apply({"a": {"vrun": 0}, "b": {"vrun": 0}}, phantom[:3], no_file) == void
    assert ledger.apply({"vrun": 7}, phantom[:3], no_file) == void
    both = ledger.apply(
        [{"vrun": 0, "elapsed": 1.0}, {"vrun": 1, "elapsed": 1.0}], phantom, no_file
    )
    assert [run["elapsed"] for run in both] == [0.0, 4.0]


def test_a_file_s_lines_are_counted_in_the_kept_file_only_if_its_bytes_were_there() -> None:
    kept = b'{"id": 1}\n{"id": 2}\n{"id": 3}\n'
    first_two = kept[:20]

    def state(data: bytes) -> list[Any]:
        return [len(data), hashlib.sha256(data).hexdigest()]

    lied = state(b"x\n" * 10)  # what a replaced read_bytes showed the probe
    blank = b"\n" * 5  # newlines written as the pages came, the rows at the end
    runs = [
        ("run", 0.0, None),
        ("request", 0.0, [0, 1, None]),
        ("request", 0.0, [0, 1, state(first_two)]),
        ("request", 0.0, [0, 1, lied]),
        ("end", 0.0, None),
    ]
    claimed = {"vrun": 0, "file": {"artefact": "f"}, "requests": [[0, 1, 5.0, 0]] * 3}
    seen = ledger.apply(claimed, runs, lambda ref: kept)
    assert [entry[3] for entry in seen["requests"]] == [0, 2, None]
    moved = ledger.apply({**claimed, "requests": [[99, 9, 5.0, 0]] * 3}, runs, lambda r: kept)
    assert [entry[:2] for entry in moved["requests"]] == [[0, 1]] * 3  # the ledger's offsets
    blanks = [("run", 0.0, None), ("request", 0.0, [0, 1, state(blank)]), ("end", 0.0, None)]
    counted = ledger.apply({**claimed, "requests": [[0, 1, 0.0, 0]]}, blanks, lambda r: blank)
    assert counted["requests"][0][3] == 0  # a blank line is no row
    fewer = ledger.apply({**claimed, "requests": [[0, 1, 5.0, 0]] * 2}, runs, lambda ref: kept)
    assert fewer["requests"] == [[None, None, None, None]] * 2


@pytest.mark.parametrize(
    "tick",
    [
        {"k": "nap", "s": 1.0},
        {"k": "wait", "s": -1.0},
        {"k": "wait", "s": "1"},
        {"k": "wait", "s": 1e12},
        {"k": "call", "s": 0.0, "v": [1]},
        {"k": "request", "s": 0.0, "v": [0, 1, [1, "short"]]},
        {"k": "request", "s": 0.0, "v": None},
    ],
)
def test_a_tick_off_the_ledger_s_shapes_is_refused(tick: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ledger.tick_of(tick)


def stream(*events: dict[str, Any]) -> ResultStream:
    result = ResultStream(names=["p"], suffix="", limits=Limits(), source="")
    for event in events:
        result.feed(json.dumps(event).encode(), 0.0)
    return result


def test_ticks_belong_to_the_probe_in_flight_and_nowhere_else() -> None:
    tick = {"event": Event.TICK, "k": "wait", "s": 1.0}
    done = stream(
        {"event": Event.LOADED},
        {"event": Event.START, "probe": "p"},
        {"event": Event.TICK, "k": "run", "s": 0},
        tick,
        {"event": Event.DONE, "probe": "p", "obs": {}},
        {"event": Event.END},
    )
    assert done.deviation is None
    assert done.records["p"].ledger == (("run", 0.0, None), ("wait", 1.0, None))
    between = stream({"event": Event.LOADED}, tick)
    assert between.deviation is not None
    before = stream(tick)
    assert before.deviation is not None


def test_past_the_cap_the_ledger_is_cut_and_nothing_is_voided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("grader.runtime.stream.MAX_TICKS", 3)
    tick = {"event": Event.TICK, "k": "wait", "s": 0.001}
    polled = stream(
        {"event": Event.LOADED},
        {"event": Event.START, "probe": "p"},
        {"event": Event.TICK, "k": "run", "s": 0},
        *[tick] * 10,
        {"event": Event.DONE, "probe": "p", "obs": {"vrun": 0, "elapsed": 0.0}},
        {"event": Event.END},
    )
    assert polled.deviation is None and len(polled.records["p"].ledger) == 3
    seen = ledger.apply(polled.records["p"].obs, polled.records["p"].ledger, no_file)
    assert seen["elapsed"] is None  # the run never ends in the ledger: its probe fails alone


def recorded_waits(body: Any) -> tuple[list[float], int, float]:
    """The waits the loop reported, how often its clock was seen set by something else,
    and what the clock said at the end."""
    waits: list[float] = []
    moved: list[None] = []

    async def make(clock: Clock) -> float:
        await body(asyncio.get_running_loop())
        await asyncio.sleep(0)  # one more select, to look at the clock again
        return clock.now()

    run = drive(make, on_advance=waits.append, on_moved=lambda: moved.append(None))
    assert run.error is None
    return [round(w, 6) for w in waits], len(moved), float(run.value or 0.0)


def test_a_clock_set_either_way_is_no_wait_and_is_seen() -> None:
    async def honest(loop: Any) -> None:
        await asyncio.sleep(2.0)
        timer = loop.create_future()
        loop.call_later(1.0, timer.set_result, None)  # a wait on a timer of its own
        await timer

    async def rewound(loop: Any) -> None:
        saved = loop._LoopTimeEventLoop__now
        await asyncio.sleep(3.0)  # a wait, written when the loop made it
        loop._LoopTimeEventLoop__now = saved  # ... and hidden from the loop's clock

    async def skipped(loop: Any) -> None:
        loop._LoopTimeEventLoop__now += loop._LoopTimeEventLoop__time2int(5.0)  # no wait
        await asyncio.sleep(1.0)

    assert recorded_waits(honest) == ([2.0, 1.0], 0, 3.0)
    assert recorded_waits(rewound) == ([3.0], 1, 0.0)  # the clock says 0; the ledger 3
    assert recorded_waits(skipped) == ([1.0], 1, 6.0)  # the clock says 6; the ledger 1


def test_a_moved_clock_or_an_early_end_voids_the_run() -> None:
    moved = ticks(("run", 0), ("call", 0), ("moved", 0), ("end", 0))
    early = ticks(("run", 0), ("end", 0), ("wait", 5.0), ("end", 0))
    claim = {"vrun": 0, "times": [0.0], "calls": 1, "elapsed": 0.0}
    for runs in (moved, early):
        seen = ledger.apply(claim, runs, no_file)
        assert (seen["times"], seen["elapsed"]) == (None, None)


def test_a_sinks_record_is_the_ticks_and_a_rewritten_report_believes_nothing() -> None:
    sink = [
        ("run", 0.0, None),
        ("load", 0.0, [7, ["a", "b"]]),
        ("load", 0.0, [7, ["a", "b"]]),
        ("wrote", 0.0, [7, 1]),  # the second load returned first
        ("wrote", 0.0, [7, 0]),
        ("report", 0.0, [7, "written"]),
        ("end", 0.0, None),
    ]
    # the child's own lists were deduplicated after the fact: the ledger was not
    claimed = {"vrun": 0, "steps": {"written": {"record": [7, "written"]}, "loads": ["a"]}}
    seen = ledger.apply(claimed, sink, no_file)
    assert seen["steps"] == {"written": ["a", "b", "a", "b"], "loads": ["a"]}
    literal = {"vrun": 0, "steps": {"written": ["a", "b"]}}  # the reference swapped for a list
    assert ledger.apply(literal, sink, no_file) == {
        "void": "a record the probe made is missing from its report"
    }
    unreported = [t for t in sink if t[0] not in ("report", "run", "end")]
    assert ledger.apply({"record": [8, "loads"]}, unreported, no_file) == []  # never loaded
    assert ledger.apply({"record": [7, "nope"]}, unreported, no_file) is None
