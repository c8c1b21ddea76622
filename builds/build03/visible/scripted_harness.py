"""The harness of build 03's visible checks: scripted faults on virtual time.

`Destination` is an inner sink whose writes fail or take time on cue; `ScriptedOp` is an op
for ``with_retry`` that plays a script of errors and values and notes when it was called.
`expect_loads` and `expect_retry` run a scenario through the learner's sink or retry loop and
say, in the one feedback vocabulary, the call, what came back and what was expected. They
know the scenario's literal outcome (written out by hand), nothing of how a build answers:
this module ships to learners and holds no reference implementation. Running a scenario
twice gives the same verdict.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from etl import MemorySink, NetworkError
from workbook.checking.feedback import show
from workbook.checks import CheckFailure, Said, expect, expect_equal, outcome_of


def loop_time() -> float:
    return asyncio.get_running_loop().time()


# ───────────────────────────────────────────────────────────── the sink


class Destination(MemorySink):
    """A `MemorySink` taking `delay` virtual seconds per write, whose first `failures` writes
    raise `NetworkError` (a connection dropped mid-write)."""

    def __init__(self, failures: int = 0, delay: float = 0.0) -> None:
        super().__init__()
        self.failures, self.delay = failures, delay
        self.errors: list[NetworkError] = []

    async def load(self, rows: Sequence[Any]) -> int:
        await asyncio.sleep(self.delay)
        if len(self.errors) < self.failures:
            self.errors.append(NetworkError("connection dropped mid-write"))
            raise self.errors[-1]
        return await super().load(rows)


#: How `batch` specs read, said in feedback when a spec uses them.
LEGEND = {"*": "x* is a copy of x", "!": "x! is x with latitude=math.inf"}
#: One load of a scenario: the rows (a `batch` spec), and what it returns or raises.
Load = tuple[str, "int | type[Exception]"]


def batch(rows: Sequence[Any], spec: str) -> list[Any]:
    """The rows `spec` names: ``"a b a* c!"`` is rows[0], rows[1], a copy of rows[0] (equal,
    another object) and rows[2] with ``latitude=math.inf`` (a row with no canonical form).
    Every row is a fresh copy, so the learner's sink can keep none of the checks' objects."""
    out = []
    for token in spec.split():
        row = dataclasses.replace(rows["abcd".index(token[0])])
        out.append(dataclasses.replace(row, latitude=math.inf) if token.endswith("!") else row)
    return out


def _listed(spec: str) -> str:
    return f"[{', '.join(spec.split())}]"


async def expect_loads(
    sink: Any,
    inner: MemorySink,
    made: str,
    rows: Sequence[Any],
    loads: Sequence[Load],
    end: str,
    note: str = "",
) -> None:
    """Run `loads` one after the other on `sink` (built over `inner`, as `made` says) and fail
    unless each returned or raised what it should and `inner` ends up holding exactly the rows
    `end` names, in order. The feedback names rows by letter (a, b, c, d are `rows`) and ends
    with `note`."""
    letter = {row.id: name for name, row in zip("abcd", rows, strict=False)}
    done = f"a, b, c, d = four launches; {made}"
    for spec, want in loads:
        legend = "; ".join(text for mark, text in LEGEND.items() if mark in spec)
        call = f"{done}; await sink.load({_listed(spec)})" + (f" ({legend})" if legend else "")
        ok, got = await outcome_of(sink.load(batch(rows, spec)))
        said = f"returned {want}" if isinstance(want, int) else f"raises {want.__name__}"
        if isinstance(want, int):
            expect(ok and type(got) is int and got == want, call, Said.of(ok, got), said, note)
        else:
            expect(not ok and type(got) is want, call, Said.of(ok, got), said, note)
        done = f"{done}; sink.load({_listed(spec)}) {said}"
    expect(
        inner.rows == batch(rows, end),
        f"{done}: the rows inner received",
        [letter.get(getattr(row, "id", None), row) for row in inner.rows],
        f"{_listed(end)}: each row once, in batch order",
        note,
    )


# ───────────────────────────────────────────────────────────── the retry loop


class ScriptedOp:
    """A zero-argument op: each call makes the next outcome (the last one repeats) and raises
    it if it is an exception, returns it otherwise. Notes the virtual time of each call and
    keeps the last error it raised."""

    def __init__(self, *outcomes: Callable[[], Any]) -> None:
        self.outcomes = outcomes
        self.times: list[float] = []
        self.last: BaseException | None = None

    async def __call__(self) -> Any:
        outcome = self.outcomes[min(len(self.times), len(self.outcomes) - 1)]()
        self.times.append(loop_time())
        if isinstance(outcome, BaseException):
            self.last = outcome
            raise outcome
        return outcome


def fails(error: Callable[[], Any], then: Any = None) -> ScriptedOp:
    """An op raising ``error()`` every time, or once and then returning `then`."""
    return ScriptedOp(error) if then is None else ScriptedOp(error, lambda: then)


def policy_text(kwargs: dict[str, Any]) -> str:
    """``RetryPolicy(max_attempts=3, base_delay=math.nan)``, as a learner would type it."""

    def value(v: Any) -> str:
        return f"math.{v!r}" if isinstance(v, float) and not math.isfinite(v) else repr(v)

    return f"RetryPolicy({', '.join(f'{k}={value(v)}' for k, v in kwargs.items())})"


async def waits_on_the_loop(ns: Any) -> None:
    """Fail at once, for a thousandth of a second of real time, when with_retry blocks the
    thread to wait: every longer wait of the checks would then be waited for real."""
    policy = ns.RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.001)
    start, real = loop_time(), time.perf_counter()
    ok, _ = await outcome_of(ns.with_retry(policy, fails(lambda: NetworkError("blip"), "ok")))
    waited, real = loop_time() - start, time.perf_counter() - real
    if ok and waited < 0.0005 <= real:
        raise CheckFailure(
            "with_retry(RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.001), op),"
            " op failing once",
            f"waited {real * 1000:.1f} ms of real time, 0 on the event loop",
            "waits on the event loop: await asyncio.sleep(...), which virtual time makes instant",
            "It waited for real: use await asyncio.sleep(...), never time.sleep(...), which"
            " also freezes every other task on the loop.",
            cause="sleeps_on_the_event_loop_not_the_thread",  # it fails every check that waits
        )


#: The `want` of `expect_retry` for "raises the op's last error itself".
RAISES = object()


async def expect_retry(
    ns: Any, kwargs: dict[str, Any], op: ScriptedOp, label: str, want: Any, times: list[float]
) -> None:
    """Fail unless ``with_retry(RetryPolicy(**kwargs), op)`` returned `want` (or, for
    `RAISES`, raised the op's last error itself), calling op at exactly `times` (virtual
    seconds from the start) and ending at the last call."""
    call = f"await with_retry({policy_text(kwargs)}, op), op {label}"
    await waits_on_the_loop(ns)
    start = loop_time()
    ok, got = await outcome_of(ns.with_retry(ns.RetryPolicy(**kwargs), op))
    ended, called = round(loop_time() - start, 6), [round(t - start, 6) for t in op.times]
    if want is RAISES:
        expect(
            not ok and got is op.last,
            call,
            Said.of(ok, got),
            f"raises the op's last error itself: {show(op.last)}",
            note="Re-raise the error caught (a bare `raise`): no new error, no wrapper. Only"
            " EtlErrors are caught at all: anything else is a bug, passed through at once.",
        )
    else:
        right = ok and type(got) is type(want) and got == want
        expect(right, call, Said.of(ok, got), f"returned {want!r}")
    expect_equal(
        f"{call}: when op was called (virtual seconds)",
        called,
        times,
        note="max_attempts calls in all. After a transient EtlError, wait err.retry_after()"
        " when it is not None (0.0 included; never capped, never added to the backoff), else"
        " backoff_delay(policy, attempt). A permanent one is raised at once.",
    )
    expect(
        math.isclose(ended, times[-1], abs_tol=1e-6),
        f"{call}: when with_retry ended",
        ended,
        f"{times[-1]}, right after the last call: N attempts, at most N - 1 waits",
        note="Check whether attempts remain before sleeping: no call follows the last one.",
    )
