"""The results stream: what the parent makes of one worker's lines on the results pipe.

A `ResultStream` follows the sequence `grader.runtime.protocol` describes, line by line, and turns
it into one `ProbeRecord` per probe; the functions below word the reasons a learner reads when a
probe or the whole load did not finish. Feeding the same lines twice gives the same records.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from grader.classes.ledger import JSON, MAX_TICKS, Tick, tick_of
from grader.runtime.protocol import REPORTS, Event, Limits
from grader.runtime.results import ProbeRecord

#: A results line longer than this is not a probe's observation.
MAX_LINE = 4 * 2**20
#: Deeper than any probe's report nests (`grader.suites.observe.plain` stops at 8 levels of the
#: value).
MAX_DEPTH = 64
_SIGNALS = {
    signal.SIGKILL: "killed (SIGKILL: out of memory, or stopped by the grader)",
    signal.SIGXCPU: "stopped by the CPU time limit",
    signal.SIGSEGV: "the interpreter crashed (segmentation fault)",
    signal.SIGABRT: "the interpreter aborted",
}


# ---------------------------------------------------------------------------------------
# The worker's lines, read once: each line of the results pipe becomes one of these (the
# wire stays JSON, `grader.runtime.protocol.Event`); the stream then never looks into a dict.


@dataclass(frozen=True)
class Loaded:
    """``loaded``: the answers ran to their end."""

    kind: str


@dataclass(frozen=True)
class LoadFailed:
    """``load_error``: the answers did not load; `error` is ``"timeout"`` or what they
    raised, `line` the exported line it came from, when known."""

    kind: str
    error: JSON
    line: JSON


@dataclass(frozen=True)
class Started:
    """``start``: the worker starts probe `probe`."""

    kind: str
    probe: JSON


@dataclass(frozen=True)
class Ticked:
    """``tick``: one line of the ledger of virtual time; `tick` None when the line is not in
    any of the ledger's shapes (a deviation once a probe runs)."""

    kind: str
    tick: Tick | None


@dataclass(frozen=True)
class Reported:
    """A probe's report (`REPORTS`): ``done`` with its observation `obs`, ``timeout``, or
    ``probe_error`` with its `error`; `seconds` None when it is not a duration."""

    kind: str
    probe: JSON
    seconds: float | None
    obs: JSON = None
    error: JSON = None


@dataclass(frozen=True)
class Ended:
    """``end``: the worker's last report."""

    kind: str


@dataclass(frozen=True)
class Unknown:
    """A line whose ``event`` the protocol does not have (always a deviation)."""

    kind: str


WorkerEvent = Loaded | LoadFailed | Started | Ticked | Reported | Ended | Unknown


def parse_event(data: dict[str, Any]) -> WorkerEvent:
    """One results line's JSON object, whose ``"event"`` is text, as its typed event. What
    the fields must hold is checked where it counts (a tick or a report off its shape is a
    deviation only while a probe runs; before, it is one for coming at the wrong time)."""
    kind: str = data["event"]
    if kind == Event.LOADED:
        return Loaded(kind)
    if kind == Event.LOAD_ERROR:
        return LoadFailed(kind, data.get("error"), data.get("line"))
    if kind == Event.START:
        return Started(kind, data.get("probe"))
    if kind == Event.TICK:
        return Ticked(kind, _tick(data))
    if kind in REPORTS:
        seconds = _duration(data.get("seconds", 0.0))
        return Reported(kind, data.get("probe"), seconds, data.get("obs"), data.get("error"))
    if kind == Event.END:
        return Ended(kind)
    return Unknown(kind)


def _tick(data: dict[str, Any]) -> Tick | None:
    try:
        return tick_of(data)
    except Exception:  # off the ledger's shapes, whatever it holds: refused where it counts
        return None


def _duration(seconds: JSON) -> float | None:
    if type(seconds) not in (int, float) or not 0 <= seconds < 1e6:
        return None
    return float(seconds)


@dataclass
class ResultStream:
    """The parent's view of one worker: which probe is in flight, what came back.

    The worker writes, in order: ``loaded``, then per probe ``start`` and one report
    (``done``, ``timeout`` or ``probe_error``), then ``end``. A report counts only once the
    worker confirms it by going on (the next ``start``, or ``end``): a report forged by the
    learner's code, which runs in the worker, is followed by the probe's real report or by no
    confirmation at all. Anything off this sequence is a deviation, and every report of the
    worker is void: once something else writes on the channel, none of it can be trusted.
    """

    names: list[str]
    suffix: str
    limits: Limits
    source: str
    loaded: bool = False
    load_error: str | None = None
    started: list[str] = field(default_factory=list)
    current: str | None = None
    records: dict[str, ProbeRecord] = field(default_factory=dict)
    unconfirmed: str | None = None
    ended: bool = False
    deviation: str | None = None
    deadline: float = 0.0
    ticks: list[Tick] = field(default_factory=list)
    _partial: bytes = field(default=b"", repr=False)

    def key(self, name: str) -> str:
        return name + self.suffix

    def feed(self, line: bytes, now: float) -> None:
        """One line from the results pipe. Anything off the protocol is a deviation: whatever
        the line holds (JSON nested thousands deep, a number where text goes), reading it
        never raises here, so the job is always followed to its end."""
        if self.deviation:
            return
        try:
            event = json.loads(line)
            if type(event) is not dict or type(event.get("event")) is not str:
                raise ValueError("not a report")
            if _depth(event) > MAX_DEPTH:
                raise ValueError("nested deeper than any probe's report")
            self._feed(parse_event(event), now)
        except Exception:  # any line the protocol does not make is a deviation
            self.deviation = "a line on the results channel that is not a probe's report"

    def _feed(self, event: WorkerEvent, now: float) -> None:
        kind = event.kind
        if not self.loaded and self.load_error is None:
            self._feed_load(event, now)
        elif self.ended:
            self.deviation = f"a {kind!r} report after the worker's last one"
        elif self.current is None:
            self._feed_between(event, now)
        elif isinstance(event, Ticked):
            if event.tick is None:
                raise ValueError("not a tick")
            # Past the cap the ledger is cut, never voided: a loop polling with tiny sleeps
            # costs its own probe (its run never ends in the ledger), not the other reports.
            if len(self.ticks) < MAX_TICKS:
                self.ticks.append(event.tick)
        elif not isinstance(event, Reported) or event.probe != self.current:
            self.deviation = f"an unexpected {kind!r} report while {self.current} was running"
        else:
            self._feed_report(self.current, event, now)

    def _step(self) -> float:
        """How long one probe may take from its start, or from the report before it."""
        return self.limits.probe_seconds + self.limits.grace_seconds

    def _feed_load(self, event: WorkerEvent, now: float) -> None:
        """Before the answers loaded: only ``loaded`` or ``load_error`` may come."""
        if isinstance(event, Loaded):
            self.loaded, self.deadline = True, now + self._step()
        elif isinstance(event, LoadFailed):
            self.load_error = load_reason(event, self.source)
        else:
            self.deviation = f"a {event.kind!r} report before the answers had loaded"

    def _feed_between(self, event: WorkerEvent, now: float) -> None:
        """Between probes: the next probe's ``start``, or ``end`` once every probe ran."""
        expected = self.names[len(self.started)] if len(self.started) < len(self.names) else None
        if isinstance(event, Started) and expected is not None and event.probe == expected:
            self.current = expected
            self.started.append(expected)
            self.unconfirmed = None
            self.deadline = now + self._step()
        elif isinstance(event, Ended) and expected is None:
            self.ended, self.unconfirmed = True, None
        else:
            self.deviation = f"an unexpected {event.kind!r} report between probes"

    def _feed_report(self, name: str, event: Reported, now: float) -> None:
        """The running probe's report (`REPORTS`): its record, unconfirmed until the worker
        goes on."""
        if event.seconds is None:
            raise ValueError("seconds is not a duration")
        if event.kind == Event.DONE:
            record = ProbeRecord(
                self.key(name), "done", event.obs, "", event.seconds, ledger=tuple(self.ticks)
            )
        elif event.kind == Event.TIMEOUT:
            record = ProbeRecord(self.key(name), "timeout", None, timeout_reason(self.limits))
        else:
            error = event.error
            text = error if isinstance(error, str) else json.dumps(error)
            record = ProbeRecord(
                self.key(name), "error", None, f"the probe itself failed: {text}", event.seconds
            )
        self.records[name] = record
        self.ticks = []
        self.current = None
        self.unconfirmed = name
        self.deadline = now + self._step()

    def take(self, chunk: bytes) -> None:
        """Feed the complete lines of what came so far; the unfinished last line waits for the
        next chunk, whichever read (`Runner._watch` or `drain`) brings it."""
        now = time.monotonic()
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            self.feed(line, now)
        if len(self._partial) > MAX_LINE:
            self.deviation = "a report longer than any probe writes"
            self._partial = b""

    def drain(self, fd: int) -> None:
        """Read what the ended worker left in the pipe (its writers are all dead now), after
        whatever half line was read before."""
        os.set_blocking(fd, True)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not self.deviation:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
            if not ready:
                break
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            self.take(chunk)

    def settle(self) -> None:
        """Once the worker is gone: void what a deviation taints or nothing confirmed."""
        if self.deviation is not None:
            reason = void_reason(self.deviation)
            for name in self.records:
                self.records[name] = ProbeRecord(self.key(name), "void", None, reason)
        elif self.unconfirmed is not None:
            name = self.unconfirmed
            reason = void_reason("the worker ended right after this report, unconfirmed")
            self.records[name] = ProbeRecord(self.key(name), "void", None, reason)


def _depth(value: Any) -> int:
    """How deeply `value` (parsed JSON: only plain dicts and lists nest) nests lists and
    dicts, counted a level at a time without recursion, and no further than one past
    `MAX_DEPTH`."""
    depth, level = 0, [value]
    while depth <= MAX_DEPTH:
        containers = [item for item in level if type(item) is dict or type(item) is list]
        if not containers:
            break
        depth += 1
        level = [
            child
            for item in containers
            for child in (item.values() if type(item) is dict else item)
        ]
    return depth


def read_chunk(fd: int) -> bytes | None:
    """What the non-blocking pipe holds now (maybe nothing), or None once it is closed."""
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""
    return chunk or None


# ---------------------------------------------------------------------------------------
# The reasons a learner reads.


def timeout_reason(limits: Limits) -> str:
    return (
        f"timed out: the code under test did not return within {limits.probe_seconds:g} s of"
        " real time (an endless loop, or a blocking wait?)"
    )


def load_reason(event: LoadFailed, source: str) -> str:
    error = event.error
    if error == "timeout":
        return "your answer cells did not finish running (an endless loop at the top level?)"
    line = event.line
    cell = _cell_of(line, source) if isinstance(line, int) else ""
    return f"your answer cells could not run: {error}" + (f" (in {cell})" if cell else "")


def exit_reason(code: int | None) -> str:
    """How a worker whose walls were up and that exited with `code` (None: no report) is
    explained: always as the learner's doing (``os._exit(71)`` included), since the learner's
    code could have produced any of it."""
    if code is None:
        return "the grading process stopped answering"
    if code < 0:
        sig = -code
        known = _SIGNALS.get(signal.Signals(sig)) if sig in signal.valid_signals() else None
        return known or f"killed by signal {sig}"
    return f"the process exited with code {code} (sys.exit or os._exit in your code?)"


def void_reason(deviation: str) -> str:
    return (
        "not graded: something other than the probe wrote to the grader's results channel"
        f" ({deviation})"
    )


def _cell_of(line: int, source: str) -> str:
    """Which notebook cell an exported line belongs to, from the export's ``# %%`` markers."""
    cell = ""
    for number, text in enumerate(source.splitlines(), start=1):
        if number > line:
            break
        match = re.match(r"# %% cell (\d+) \[(\w+)\]", text)
        if match:
            cell = f"cell {match[1]} ({match[2]})"
    return cell
