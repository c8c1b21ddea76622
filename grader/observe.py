"""What a probe may send home: plain JSON observations of the learner's code.

Probes run inside the grading child, next to the learner's code, so nothing they report may
be an object the learner made: a `str` subclass whose ``==`` always says True would fool any
comparison made with it. `plain` turns a value into JSON types and *records the exact type*
of anything else, so the judge in the parent compares real `str`/`int`/`float` values and sees
a subclass for what it is. Observing the same call twice gives equal observations.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, SupportsIndex

from workbook.feedback import cut
from workbook.registry import Registry
from workbook.vtime import VIRTUAL_DEADLINE as VIRTUAL_DEADLINE  # re-exported for probes
from workbook.vtime import Clock as Clock  # re-exported for probes
from workbook.vtime import VirtualDeadlineExceeded, drive

#: Real seconds a guarded `time.sleep` may still take per call (see `guard_blocking_sleep`).
BLOCKING_SLEEP_CAP = 0.002
_TEXT_LIMIT = 300
_blocking: list[float] = []

JSON = Any
ProbeFn = Callable[[ModuleType], JSON]


class ProbeTimeout(BaseException):  # raised by SIGALRM, named for the report
    """Raised in the child when a probe runs out of real time. A BaseException, so that a
    learner's ``except Exception`` cannot swallow it (a bare ``except`` can: the parent's hard
    limit is there for that)."""


class MissingName(Exception):  # reported, not raised to learners
    """The answer cells do not define a name the probe needs."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def plain(value: Any, depth: int = 0) -> JSON:
    """`value` as JSON types, exact types only (lists, tuples as lists, dicts with str keys);
    anything else as ``{"type": ..., "repr": ...}``.

    Non-finite floats become ``{"float": "nan"}`` (JSON has no NaN). Never calls a learner's
    ``__eq__``; calls ``repr`` only for the record, guarded.
    """
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind in (list, tuple) and depth < 8:
        return [plain(item, depth + 1) for item in value]
    if kind is dict and depth < 8 and all(type(k) is str for k in value):
        return {k: plain(v, depth + 1) for k, v in value.items()}
    return {"type": _type_name(value), "repr": safe_text(value, repr)}


def safe_text(value: Any, render: Callable[[Any], str] = str) -> str:
    """`render(value)` cut to a few hundred characters, memory addresses left out (so that
    grading twice tells the learner the same thing); never raises."""
    try:
        text = render(value)
        if type(text) is not str:
            return f"<{_type_name(value)}>"
        return cut(str.__str__(text), _TEXT_LIMIT)
    except BaseException:  # a learner's __str__/__repr__ may do anything
        return f"<{_type_name(value)} (its repr raised)>"


def _type_name(value: Any) -> str:
    try:
        return str(type(value).__qualname__)
    except BaseException:
        return "?"


def raised(exc: BaseException) -> dict[str, JSON]:
    """An exception as an observation: its class name and message, never the object."""
    if isinstance(exc, ProbeTimeout):
        raise exc
    if isinstance(exc, MissingName):
        return {"missing": exc.name}
    return {"raised": _type_name(exc), "message": safe_text(exc)}


def need(ns: ModuleType, name: str) -> Any:
    """The learner's `name`, or `MissingName` (reported as "not defined") when absent."""
    try:
        return ns.__dict__[name]
    except KeyError:
        raise MissingName(name) from None


def attempt(fn: Callable[[], Any]) -> dict[str, JSON]:
    """Call `fn`: ``{"ok": plain(result)}`` or ``{"raised": name, "message": text}``."""
    try:
        return {"ok": plain(fn())}
    except BaseException as exc:  # SystemExit included: it is an observation
        return raised(exc)


def guard_blocking_sleep() -> None:
    """Make `time.sleep` record what it was asked and sleep at most `BLOCKING_SLEEP_CAP`.

    Installed in the worker before the learner's code is loaded (so ``from time import sleep``
    gets it too): a retry loop that blocks the thread is then seen, through `vrun`'s
    ``blocking`` field and a virtual clock that did not move, without costing real seconds.
    """
    real_sleep = time.sleep

    def sleep(seconds: float | SupportsIndex) -> None:
        _blocking.append(float(seconds))
        real_sleep(min(max(float(seconds), 0.0), BLOCKING_SLEEP_CAP))

    time.sleep = sleep


def vrun(
    make: Callable[[Clock], Awaitable[Any]], *, deadline: float = VIRTUAL_DEADLINE
) -> dict[str, JSON]:
    """Run ``make(clock)`` on a fresh virtual-time loop (`workbook.vtime.drive`).

    Returns the `attempt` shape plus ``elapsed`` (virtual seconds), ``blocking`` (seconds
    asked of a blocking `time.sleep` meanwhile) and ``real`` (wall seconds, for messages
    only). A coroutine still running after `deadline` virtual seconds is reported as
    ``{"raised": "VirtualDeadline"}``.
    """
    started = time.perf_counter()
    blocked_before = len(_blocking)
    spent: dict[str, float] = {}

    def measure() -> None:
        spent["blocking"] = round(sum(_blocking[blocked_before:]), 6)
        spent["real"] = round(time.perf_counter() - started, 4)

    async def watched(clock: Clock) -> Any:
        try:
            return await make(clock)
        finally:  # before the loop closes: what its leftover tasks do then does not count
            measure()

    run = drive(watched, deadline=deadline)
    if not spent:
        measure()
    outcome: dict[str, JSON]
    if isinstance(run.error, VirtualDeadlineExceeded):
        outcome = {"raised": "VirtualDeadline", "message": f"still running after {deadline:g} s"}
    elif run.error is not None:
        outcome = raised(run.error)
    else:
        outcome = {"ok": plain(run.value)}
    outcome["elapsed"] = round(run.elapsed, 6)
    outcome["blocking"] = spent["blocking"]
    outcome["real"] = spent["real"]
    return outcome


@dataclass(frozen=True)
class Probe:
    name: str
    fn: ProbeFn
    interpreters: int = 1
    """2: the probe also runs in a second interpreter with a different PYTHONHASHSEED."""


class Probes(Registry[Probe]):
    """A hidden suite's probes, by name, in the order they are declared."""

    kind = "probe"

    def add(self, name: str, *, interpreters: int = 1) -> Callable[[ProbeFn], ProbeFn]:
        def register(fn: ProbeFn) -> ProbeFn:
            self.register(name, Probe(name, fn, interpreters))
            return fn

        return register
