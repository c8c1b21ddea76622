"""`grader.runtime.stream.ResultStream`: the worker's report lines, accepted only in the
honest order; any deviation voids the worker's every report."""

from __future__ import annotations

import json
import os
import threading

import pytest

from grader import Limits
from grader.runtime.stream import MAX_DEPTH, ResultStream


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
