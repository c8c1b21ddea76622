"""What a probe may send home: plain JSON observations of the learner's code.

Probes run inside the grading child, next to the learner's code, so nothing they report may
be an object the learner made: a `str` subclass whose ``==`` always says True would fool any
comparison made with it. `plain` turns a value into JSON types and *records the exact type*
of anything else, so the judge in the parent compares real `str`/`int`/`float` values and sees
a subclass for what it is. Observing the same call twice gives equal observations.

Everything here is imported by the fork server before any learner's code runs, so what it
takes hold of then (the classes in `KINDS`, `random.Random`, `hashlib`) is the real
thing even if a learner rebinds those names later. A probe is still a claim: the learner's code
shares its process and can forge any of it. What the claims are worth is the judges' business:

- `raised` reports an exception's class name *and* which of `KINDS` it really is an instance
  of, so a local ``class ParseError(ValueError)`` is not taken for `etl.ParseError`;
- a *seeded* probe (``PROBES.add(name, seeded=True)``) draws its inputs from `inputs_rng`, a
  generator seeded with the exported source the worker ran and the suite's salt: the parent
  draws the same inputs from the same text, so a recorded observation of other answers, or
  answers written in advance, are for other inputs;
- `keep` puts a file the learner's code wrote (a database, a JSONL file) where the parent
  reads it itself once the worker has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import linecache
import math
import os
import random
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, SupportsIndex

import etl
from workbook.checking.feedback import cut
from workbook.shared.registry import Registry
from workbook.vtime import VIRTUAL_DEADLINE as VIRTUAL_DEADLINE  # re-exported for probes
from workbook.vtime import Clock as Clock  # re-exported for probes
from workbook.vtime import VirtualDeadlineExceeded, drive

#: Real seconds a guarded `time.sleep` may still take per call (see `guard_blocking_sleep`).
BLOCKING_SLEEP_CAP = 0.002
_TEXT_LIMIT = 300
_blocking: list[float] = []

JSON = Any
ProbeFn = Callable[[ModuleType], JSON]
SeededFn = Callable[[ModuleType, random.Random], JSON]

#: Exception classes a judge may ask for by name, taken before any learner's code runs: an
#: exception is reported as one of them only if it really is an instance of it.
KINDS: dict[str, type[BaseException]] = {
    kind.__name__: kind
    for kind in (
        etl.EtlError,
        etl.ParseError,
        etl.NetworkError,
        etl.RequestTimeout,
        etl.RateLimited,
        etl.HttpStatus,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        OverflowError,
        TimeoutError,
        asyncio.CancelledError,
        dataclasses.FrozenInstanceError,
        sqlite3.Error,
        sqlite3.IntegrityError,
        sqlite3.OperationalError,
    )
}
#: The largest file `keep` hands to the parent; a bigger one is reported as too large.
ARTEFACT_LIMIT = 8 * 2**20
#: What SQLite may leave beside a database file, each needed to read it as SQLite would: the
#: write-ahead log, the rollback journal (hot after a kill), the WAL's shared-memory index.
SIDECARS = ("-wal", "-journal", "-shm")
_Random = random.Random
_sha256 = hashlib.sha256


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
    """An exception as an observation: its class name, message, and the names of the `KINDS`
    it is an instance of (``"is"``), never the object."""
    if isinstance(exc, ProbeTimeout):
        raise exc
    if isinstance(exc, MissingName):
        return {"missing": exc.name}
    return {"raised": _type_name(exc), "message": safe_text(exc), "is": kinds_of(exc)}


#: `KINDS` as the fork server imported it, in a tuple: a learner who edits the dict (or
#: rebinds `issubclass`) changes nothing `kinds_of` reads. Code that rewrites `kinds_of` itself
#: can still forge the claim: builds/README.md lists that residual risk.
_KIND_PAIRS: tuple[tuple[str, type[BaseException]], ...] = tuple(KINDS.items())


def kinds_of(
    exc: BaseException,
    _pairs: tuple[tuple[str, type[BaseException]], ...] = _KIND_PAIRS,
    _issubclass: Callable[[type, type], bool] = issubclass,
    _type: type[type] = type,
) -> list[str]:
    """The names of the `KINDS` that `exc` is an instance of (a learner's metaclass may make
    ``issubclass`` raise: then none)."""
    try:
        return [name for name, kind in _pairs if _issubclass(_type(exc), kind)]
    except BaseException:
        return []


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


def attempt_call(ns: ModuleType, name: str, *args: Any, **kwargs: Any) -> dict[str, JSON]:
    """`attempt` of the learner's `name` called with `args` (a missing name reported as such)."""
    return attempt(lambda: need(ns, name)(*args, **kwargs))


# ---------------------------------------------------------------------------------------
# The ledger: ticks the parent counts virtual time from (`grader.classes.ledger`).

_write = os.write  # a builtin: nothing can change it in place
_getpid = os.getpid
_thread = threading.get_ident
_ledger: list[int] = []  # the results pipe, the worker's pid and the probe's thread
_runs = [0, 0]  # vruns and ticks of the probe in flight
#: Ticks a probe may write (the parent keeps no more: `grader.classes.ledger.MAX_TICKS`).
MAX_TICKS = 50_000


def probe_starts(fd: int) -> None:
    """A probe begins: write its ticks on `fd` (the worker's results pipe), its first `vrun`
    is run 0 of its ledger."""
    _ledger[:] = [fd, _getpid(), _thread()]
    _runs[:] = [0, 0]


def probe_ends() -> None:
    """No tick between probes: the parent would take one for a deviation."""
    _ledger.clear()


def _recording() -> bool:
    """Whether ticks are written here: only while a probe is in flight, only by the worker
    itself (a process the learner's code or a probe forked writes none), on the probe's own
    thread (a learner's background thread sleeping blocks no loop of the probe's)."""
    return len(_ledger) == 3 and _getpid() == _ledger[1] and _thread() == _ledger[2]


def tick(kind: str, seconds: float = 0.0, value: JSON = None) -> None:
    """Write one tick of the ledger (see `_recording`), at most `MAX_TICKS` a probe."""
    if not _recording() or _runs[1] >= MAX_TICKS:
        return
    _runs[1] += 1
    seconds = float(seconds)
    seconds = min(max(seconds, 0.0), 1e9) if math.isfinite(seconds) else 1e9
    event = {"event": "tick", "k": kind, "s": round(seconds, 6), "v": value}
    data = (json.dumps(event, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[_write(_ledger[0], data) :]


_record_ids = [0]


def new_record() -> int:
    """A fresh id for a probe's own record (a sink's loads), unique in this worker."""
    _record_ids[0] += 1
    return _record_ids[0]


# Builtins, taken before any learner's code runs: nothing can change them in place, where a
# `pathlib` method replaced could show a probe bytes the file never held.
_open, _read, _close, _getcwd = os.open, os.read, os.close, os.getcwd


def scratch_path(name: str) -> str:
    """The path of `name` in the worker's folder, made without `pathlib`."""
    return _getcwd() + "/" + name


def file_state(path: str) -> JSON:
    """[size, sha256] of the file at `path` now (None when there is none): what the parent
    checks the kept file's first bytes against. Read through builtins only."""
    try:
        fd = _open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    chunks: list[bytes] = []
    try:
        while chunk := _read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        _close(fd)
    data = b"".join(chunks)
    return [len(data), _sha256(data).hexdigest()]


def guard_blocking_sleep() -> None:
    """Make `time.sleep` record what it was asked and sleep at most `BLOCKING_SLEEP_CAP`.

    Installed in the worker before the learner's code is loaded (so ``from time import sleep``
    gets it too): a retry loop that blocks the thread is then seen, through `vrun`'s
    ``blocking`` field and a virtual clock that did not move, without costing real seconds.
    """
    real_sleep = time.sleep

    def sleep(seconds: float | SupportsIndex) -> None:
        _blocking.append(float(seconds))
        tick("block", float(seconds))
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
    # The run's place in the probe's ledger; None where no ledger is kept (outside a worker,
    # or in a process forked from it): the parent then believes none of its times.
    index = _runs[0] if _recording() else None
    _runs[0] += 1
    tick("run")

    def measure() -> None:
        tick("end")
        spent["blocking"] = round(sum(_blocking[blocked_before:]), 6)
        spent["real"] = round(time.perf_counter() - started, 4)

    async def watched(clock: Clock) -> Any:
        try:
            return await make(clock)
        finally:  # before the loop closes: what its leftover tasks do then does not count
            measure()

    run = drive(
        watched,
        deadline=deadline,
        on_advance=partial(tick, "wait"),
        on_moved=partial(tick, "moved"),
    )
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
    outcome["vrun"] = index
    return outcome


# ---------------------------------------------------------------------------------------
# Inputs drawn per submission.


def suite_salt(path: str | Path) -> str:
    """A digest of the probes module's text (``suite_salt(__file__)``): the salt of its seeded
    inputs, so they change whenever the suite does. Read from `linecache` when the module was
    run from text there (as `workbook.shared.modules.execute` runs it inside the walls), else from
    the file."""
    lines = linecache.cache.get(str(path))
    if lines is not None and len(lines) == 4:
        text = "".join(lines[2]).encode("utf-8")
    else:
        text = Path(path).read_bytes()
    return _sha256(text).hexdigest()[:16]


def inputs_seed(source: str, salt: str, name: str) -> str:
    """The seed of probe `name`'s inputs for the exported `source` (hex). The parent and the
    worker each compute it from the same text: same answers, same inputs."""
    # Not grader.suites.digest.content_id: this module is inside the walls, and that is an answer.
    text = f"probe-inputs\x00{salt}\x00{name}\x00{source}"
    return _sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def inputs_rng(seed: str) -> random.Random:
    """The generator every seeded input is drawn from (a str seed: the same in every process,
    whatever PYTHONHASHSEED)."""
    return _Random(seed)


def source_of(ns: ModuleType) -> str | None:
    """The exported source the worker ran as `ns`, as it was loaded
    (`workbook.shared.modules.execute` leaves it in `linecache` under the module's file name); None
    if it is gone."""
    try:
        entry = linecache.cache.get(str(ns.__dict__.get("__file__")))
        return "".join(entry[2]) if entry is not None and len(entry) == 4 else None
    except BaseException:
        return None


def tag_of(seed: str) -> str:
    """What a seeded observation carries to say which inputs it was made with."""
    return seed[:16]


# ---------------------------------------------------------------------------------------
# Files the parent reads itself.


def keep(path: str | Path, name: str) -> JSON:
    """Hand the file at `path` (with its `SIDECARS` when they exist) to the
    parent as artefact `name`: copied into the worker's folder under that name, for the runner
    to copy out after the worker ends (the bytes never travel in the observation: that is the
    child's word). The reference lists the parts that were there; a file that is not there is
    reported as absent, one over `ARTEFACT_LIMIT` as too large, unread."""
    files: dict[str, bool | None] = {}
    source = Path(path)
    for suffix in ("", *SIDECARS):
        part = Path(str(source) + suffix)
        try:
            size = part.stat().st_size
        except OSError:
            if not suffix:
                files[suffix] = None
            continue
        if size > ARTEFACT_LIMIT:
            return {"artefact": name, "too_large": size}
        try:
            data = part.read_bytes()
        except OSError:
            files[suffix] = None
            continue
        copy = Path.cwd() / (name + suffix)
        if part.resolve() != copy.resolve():
            with contextlib.suppress(OSError):
                copy.write_bytes(data)
        files[suffix] = True
    return {"artefact": name, "files": files}


# ---------------------------------------------------------------------------------------
# The registry.


@dataclass(frozen=True)
class Probe:
    name: str
    fn: ProbeFn
    interpreters: int = 1
    """2: the probe also runs in a second interpreter with a different PYTHONHASHSEED."""
    seeded: bool = False
    """Its inputs are drawn per submission (`inputs_rng`); `fn` adds the ``seed`` tag."""


class Probes(Registry[Probe]):
    """A hidden suite's probes, by name, in the order they are declared. `salt` (see
    `suite_salt`) seeds the inputs of its seeded probes."""

    kind = "probe"

    def __init__(self, salt: str = "") -> None:
        super().__init__()
        self.salt = salt

    def add(self, name: str, *, interpreters: int = 1) -> Callable[[ProbeFn], ProbeFn]:
        """A probe of the learner's module alone, on inputs fixed here."""

        def register(fn: ProbeFn) -> ProbeFn:
            self.register(name, Probe(name, fn, interpreters))
            return fn

        return register

    def seeded(self, name: str, *, interpreters: int = 1) -> Callable[[SeededFn], SeededFn]:
        """A probe ``fn(ns, rng)`` whose inputs come from `rng` (`inputs_rng` for the
        submission): its observation, a dict, gets ``"seed"``, the tag of those inputs."""

        def register(fn: SeededFn) -> SeededFn:
            def probe(ns: ModuleType) -> JSON:
                source = source_of(ns)
                seed = inputs_seed(source if source is not None else "", self.salt, name)
                seen = fn(ns, inputs_rng(seed))
                tag = tag_of(seed) if source is not None else "unreadable"
                return {**seen, "seed": tag} if isinstance(seen, dict) else seen

            self.register(name, Probe(name, probe, interpreters, seeded=True))
            return fn

        return register

    def inputs(self, source: str, name: str) -> random.Random:
        """The parent's copy of the generator probe `name` drew its inputs from."""
        return inputs_rng(inputs_seed(source, self.salt, name))
