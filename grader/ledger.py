"""The ledger: virtual time as the parent counts it, never as the child's clock says.

A probe's timings are truths no answer may set. So the child does not report times: while a
probe runs, the worker writes *ticks* on the results pipe as things happen, and the parent
keeps them (`grader.stream.ResultStream`), in order, out of the child's reach:

    run            a virtual-time run starts (`grader.observe.vrun`): its clock is 0
    wait  s        the loop itself moved its clock s seconds forward, to the next timer
    block s        a blocking ``time.sleep(s)`` was asked for (it costs no virtual time)
    call           the probe's op was called          (stamped here with the ledger's time)
    at             the probe read the clock            (stamped here)
    request  v     the fixture took a request; v: [size, sha256] of the watched file then
    moved          the clock was set between two selects (by anything but the loop itself)
    end            the run's coroutine finished

Time here is the sum of the waits since ``run``. What that holds against, and why:

- a clock *set back* after a wait (to hide it) changes nothing: the wait was written when the
  loop made it, and a line on a pipe cannot be taken back;
- a clock *set* (either way) between two of the loop's selects is seen at the next select,
  which writes ``moved``: none of that run's times is believed. Nor is a run with two
  ``end``s (the first written early, to hide what came after it);
- `asyncio.sleep`, the loop, the probe's op or counter, or the tick writer replaced or
  rewritten (``__code__``) can only leave ticks out (a wait or call the parent never saw did
  not happen: the schedule comes out short) or write more (a written wait *is* a virtual
  wait: code that writes the right schedule has done the work, elsewhere);
- a file's line count is counted here, on the kept file, from the size and digest written
  when each request came: a standard-library function replaced to count differently, or a
  file rewritten later, gives a digest that does not match the kept file's bytes (None).

`apply` puts the ledger's values in place of the child's in an observation: in every dict
holding ``"vrun": k`` (and the dicts inside it), ``elapsed``, ``blocking``, ``times`` (the
call stamps, with ``calls`` their number), ``at`` and each ``requests`` entry's time and line
count; outside such a dict, those keys become None, so a judge of a report without its run
fails rather than believes. Applying twice gives the same observation.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grader import observe

JSON = Any

KINDS = ("run", "wait", "block", "call", "at", "request", "moved", "end")
#: Ticks of one probe the parent keeps (no honest probe writes a tenth of it); the rest are
#: dropped, so a run still going then never ends in the ledger. The worker stops at as many.
MAX_TICKS = observe.MAX_TICKS
#: The keys `apply` answers from the ledger.
TIMED = ("elapsed", "blocking", "times", "at")

Tick = tuple[str, float, JSON]


def tick_of(event: dict[str, Any]) -> Tick:
    """One tick line as the parent keeps it. Raises ValueError on anything else."""
    kind, seconds, value = event.get("k"), event.get("s", 0.0), event.get("v")
    if kind not in KINDS or type(seconds) not in (int, float):
        raise ValueError("not a tick")
    seconds = float(seconds)
    if not (math.isfinite(seconds) and 0.0 <= seconds <= 1e9):
        raise ValueError("a tick's seconds out of range")
    if kind == "request" and value is not None:
        ok = (
            type(value) is list
            and len(value) == 2
            and type(value[0]) is int
            and 0 <= value[0] <= 2**40
            and type(value[1]) is str
            and len(value[1]) == 64
        )
        if not ok:
            raise ValueError("a request tick's file state is not [size, sha256]")
    elif value is not None:
        raise ValueError("a tick carries no value")
    return (kind, seconds, value)


@dataclass
class Run:
    """One virtual-time run, as the ledger saw it."""

    elapsed: float | None = None
    """Seconds waited from ``run`` to ``end``; None when the run never ended."""
    blocking: float = 0.0
    calls: list[float] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    requests: list[tuple[float, JSON]] = field(default_factory=list)
    void: bool = False
    """The loop's clock was set (either way) between two of its selects, or the run ended
    twice: none of its times can be believed."""


def runs(ticks: tuple[Tick, ...] | list[Tick]) -> list[Run]:
    """The runs of one probe, in order. Ticks outside a run (before the first ``run``, after
    an ``end``) count for none: what a loop's leftover tasks do while it closes is no part of
    the run."""
    out: list[Run] = []
    current: Run | None = None
    now = 0.0
    for kind, seconds, value in ticks:
        if kind == "run":
            current, now = Run(), 0.0
            out.append(current)
        elif current is None:
            if kind == "end" and out:  # a second end: the first was written early, to hide
                out[-1].void = True  # what came after it
            continue
        elif kind == "wait":
            now += seconds
        elif kind == "block":
            current.blocking = round(current.blocking + seconds, 6)
        elif kind == "call":
            current.calls.append(round(now, 6))
        elif kind == "at":
            current.at.append(round(now, 6))
        elif kind == "request":
            current.requests.append((round(now, 6), value))
        elif kind == "end":
            current.elapsed = round(now, 6)
            current = None
        elif kind == "moved":
            current.void = True
    return out


def apply(obs: JSON, ledger: list[Run], read: Callable[[JSON], bytes | None]) -> JSON:
    """`obs` with its timings taken from `ledger` (see the module docstring); `read(ref)` is
    the parent's own copy of a kept file, for the line counts."""
    out = copy.deepcopy(obs)
    _walk(out, None, ledger, read)
    return out


def _walk(
    value: JSON, run: Run | None, ledger: list[Run], read: Callable[[JSON], bytes | None]
) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, run, ledger, read)
        return
    if not isinstance(value, dict):
        return
    if "vrun" in value:
        index = value["vrun"]
        run = ledger[index] if type(index) is int and 0 <= index < len(ledger) else None
        if run is not None and run.void:
            run = None
        if run is None:
            value["vrun"] = None
    for key in TIMED:
        if key in value:
            value[key] = _timed(key, run)
    if "times" in value and "calls" in value:
        value["calls"] = len(value["times"]) if run is not None else None
    if isinstance(value.get("requests"), list):
        value["requests"] = _requests(value["requests"], run, read(value.get("file")))
    for key, item in value.items():
        if key != "requests":
            _walk(item, run, ledger, read)


def _timed(key: str, run: Run | None) -> JSON:
    if run is None:
        return None
    if key == "elapsed":
        return run.elapsed
    if key == "blocking":
        return run.blocking
    if key == "times":
        return list(run.calls)
    return run.at[-1] if run.at else None


def _requests(entries: list[JSON], run: Run | None, kept: bytes | None) -> list[JSON]:
    """Each entry ``[offset, nth, time(, lines)]`` with the time (and the file's line count)
    the ledger gives its request; every time None when the counts disagree."""
    stamped = run.requests if run is not None else []
    same = len(stamped) == len(entries)
    out = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, list) or len(entry) < 3:
            out.append(entry)
            continue
        fixed = list(entry)
        at, state = stamped[n] if same else (None, None)
        fixed[2] = at
        if len(fixed) > 3:
            fixed[3] = _lines(state, kept) if same else None
        out.append(fixed)
    return out


def _lines(state: JSON, kept: bytes | None) -> int | None:
    """Complete lines in the file when the request came: counted in the kept file's first
    `size` bytes, if those bytes are what the file held then (the digest written then)."""
    if state is None:
        return 0  # no file yet
    size, digest = state
    if kept is None or size > len(kept):
        return None
    prefix = kept[:size]
    if hashlib.sha256(prefix).hexdigest() != digest:
        return None
    # Rows as a restart reads them: a blank line is none (a run writing only newlines as the
    # pages came, its rows at the end, must not look like one that streamed).
    return sum(1 for line in prefix.split(b"\n")[:-1] if line.strip())
