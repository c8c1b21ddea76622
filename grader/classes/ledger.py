"""The ledger: virtual time as the parent counts it, never as the child's clock says.

A probe's timings are truths no answer may set. So the child does not report times: while a
probe runs, the worker writes *ticks* on the results pipe as things happen, and the parent
keeps them (`grader.runtime.stream.ResultStream`), in order, out of the child's reach:

    run            a virtual-time run starts (`grader.suites.observe.vrun`): its clock is 0
    wait  s        the loop itself moved its clock s seconds forward, to the next timer
    block s        a blocking ``time.sleep(s)`` was asked for (it costs no virtual time)
    call           the probe's op was called          (stamped here with the ledger's time)
    at             the probe read the clock            (stamped here)
    request  v     the fixture took a request; v: [offset, nth, [size, sha256] of the
                   watched file then (or null)]
    load     v     a probe's own sink was given a batch; v: [sink, the batch's row ids]
    wrote    v     that load returned, the batch kept; v: [sink, which load]
    report   v     the probe put a sink's record in its report; v: [sink, "loads"|"written"]
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

A sink's record (what a probe's own inner sink was given and kept) is the ticks' too: a
report names it as ``{"record": [sink, part]}`` and the parent fills it in, so a record
edited after the fact, or a literal list put where the record was, changes nothing (a
record the probe reported and the report lacks voids the observation).

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

from grader.suites import observe

JSON = Any

KINDS = ("run", "wait", "block", "call", "at", "request", "moved", "end", "load", "wrote", "report")
#: What a probe's own sink keeps, and a report may name.
PARTS = ("loads", "written")
#: Ticks of one probe the parent keeps (no honest probe writes a tenth of it); the rest are
#: dropped, so a run still going then never ends in the ledger. The worker stops at as many.
MAX_TICKS = observe.MAX_TICKS
#: The keys `apply` answers from the ledger.
TIMED = ("elapsed", "blocking", "times", "at")

Tick = tuple[str, float, JSON]


def tick_of(event: dict[str, Any]) -> Tick:
    """One tick line as the parent keeps it. Raises ValueError on anything else."""
    kind, seconds = event.get("k"), event.get("s", 0.0)
    value: Any = event.get("v")
    if kind not in KINDS or type(seconds) not in (int, float):
        raise ValueError("not a tick")
    seconds = float(seconds)
    if not (math.isfinite(seconds) and 0.0 <= seconds <= 1e9):
        raise ValueError("a tick's seconds out of range")
    if kind in ("load", "wrote", "report"):
        ok = type(value) is list and len(value) == 2 and type(value[0]) is int
        if kind == "load":
            ok = ok and type(value[1]) is list
        elif kind == "wrote":
            ok = ok and type(value[1]) is int
        else:
            ok = ok and value[1] in PARTS
        if not ok:
            raise ValueError(f"a {kind} tick is not [record, ...]")
    elif kind == "request":
        ok = type(value) is list and len(value) == 3
        ok = ok and type(value[0]) is int and type(value[1]) is int
        state = value[2] if ok else None
        if state is not None:
            ok = (
                type(state) is list
                and len(state) == 2
                and type(state[0]) is int
                and 0 <= state[0] <= 2**40
                and type(state[1]) is str
                and len(state[1]) == 64
            )
        if not ok:
            raise ValueError("a request tick is not [offset, nth, [size, sha256] or null]")
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


def records(ticks: tuple[Tick, ...] | list[Tick]) -> dict[tuple[int, str], list[JSON]]:
    """What each of the probe's own sinks was given (``loads``: each batch, in the order the
    loads began) and kept (``written``: the batches of the loads that returned, in the order
    they returned), by (sink, part)."""
    loads: dict[int, list[JSON]] = {}
    written: dict[int, list[JSON]] = {}
    for kind, _, value in ticks:
        if kind == "load":
            loads.setdefault(value[0], []).append(value[1])
        elif kind == "wrote":
            batches = loads.get(value[0], [])
            if 0 <= value[1] < len(batches):
                written.setdefault(value[0], []).extend(batches[value[1]])
    out: dict[tuple[int, str], list[JSON]] = {}
    for sink, batches in loads.items():
        out[(sink, "loads")] = batches
        out[(sink, "written")] = written.get(sink, [])
    return out


def apply(
    obs: JSON, ticks: tuple[Tick, ...] | list[Tick], read: Callable[[JSON], bytes | None]
) -> JSON:
    """`obs` with its timings and its sinks' records taken from the ticks (see the module
    docstring); `read(ref)` is the parent's own copy of a kept file, for the line counts.
    A sink's record the probe said it reported (a ``report`` tick) and that is missing from
    the report voids the whole observation: the report was rewritten."""
    out = copy.deepcopy(obs)
    kept = records(ticks)
    reported = {(v[0], v[1]) for k, _, v in ticks if k == "report"}
    found: set[tuple[int, str]] = set()
    ledger = runs(ticks)
    named: list[int] = []
    _walk(out, None, ledger, read, named)
    out = _fill(out, kept, found)
    if reported - found:
        return {"void": "a record the probe made is missing from its report"}
    if sorted(named) != list(range(len(ledger))):
        # Every run the ledger holds is named once by the report: a run opened by a forged
        # `run` tick (to soak up a wait) is named by nothing.
        return {"void": "the report does not name each run of its ledger once"}
    return out


def _fill(
    value: JSON, kept: dict[tuple[int, str], list[JSON]], found: set[tuple[int, str]]
) -> JSON:
    """Each ``{"record": [sink, part]}`` in `value` replaced by what the ticks say that sink
    was given or kept (a sink with no load: nothing)."""
    if isinstance(value, list):
        return [_fill(item, kept, found) for item in value]
    if not isinstance(value, dict):
        return value
    ref = value.get("record")
    if len(value) == 1 and type(ref) is list and len(ref) == 2 and type(ref[0]) is int:
        key = (ref[0], ref[1])
        if ref[1] in PARTS:
            found.add(key)
            return copy.deepcopy(kept.get(key, []))
        return None
    return {k: _fill(v, kept, found) for k, v in value.items()}


def _walk(
    value: JSON,
    run: Run | None,
    ledger: list[Run],
    read: Callable[[JSON], bytes | None],
    named: list[int],
) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, run, ledger, read, named)
        return
    if not isinstance(value, dict):
        return
    if "vrun" in value:
        run = _named_run(value, ledger, named)
    _stamp(value, run, read)
    for key, item in value.items():
        if key != "requests":
            _walk(item, run, ledger, read, named)


def _named_run(value: dict[str, JSON], ledger: list[Run], named: list[int]) -> Run | None:
    """The run a ``"vrun"`` key names (kept in `named`), or None, and then the key is set to
    None too, when it names no run of the ledger or a void one."""
    index = value["vrun"]
    if type(index) is int:
        named.append(index)
    run = ledger[index] if type(index) is int and 0 <= index < len(ledger) else None
    if run is not None and run.void:
        run = None
    if run is None:
        value["vrun"] = None
    return run


def _stamp(value: dict[str, JSON], run: Run | None, read: Callable[[JSON], bytes | None]) -> None:
    """Set the timed keys of one observation (and its requests) from `run`'s ledger."""
    for key in TIMED:
        if key in value:
            value[key] = _timed(key, run)
    if "times" in value and "calls" in value:
        value["calls"] = len(value["times"]) if run is not None else None
    if isinstance(value.get("requests"), list):
        value["requests"] = _requests(value["requests"], run, read(value.get("file")))


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
    """Each entry ``[offset, nth, time(, lines)]`` as the ledger gives its request (its
    offset, its number for that offset, its time, the file's line count then); all None
    when the counts disagree."""
    stamped = run.requests if run is not None else []
    same = len(stamped) == len(entries)
    out = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, list) or len(entry) < 3:
            out.append(entry)
            continue
        fixed = list(entry)
        at, seen = stamped[n] if same else (None, [None, None, None])
        fixed[:3] = [seen[0], seen[1], at]
        if len(fixed) > 3:
            fixed[3] = _lines(seen[2], kept) if same else None
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
