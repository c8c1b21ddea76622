"""Judges: the half of a hidden test that runs in the parent, on plain JSON observations.

A judge is a plain pytest test, ``test_<name>(observed)`` in one of a suite's judge modules
(``test_*.py``): the batch grader calls it directly, ``pytest builds/buildNN/hidden
--submission PATH`` through pytest. It compares what the probes reported with values computed
here, in the grading process, from inputs chosen here; those values never enter the child.
Everything the child reports is a claim (the learner's code shares its process and can forge
any of it), so a judge never compares observed values only with each other: lengths are checked
strictly, seeded inputs are drawn again here (`Observed.seeded`), files are read here
(`Observed.database`, `Observed.artefact`), exceptions are judged by class (`raises`).

Comparisons are exact in type (``1`` is not ``1.0``, ``True`` is not ``1``, a ``str`` subclass is
not a ``str``) because `observe.plain` records the exact type of everything it could not turn into
JSON. A judge passes only on positive evidence: an observation that is missing, or an exception
where a value was due, fails it. Judging the same observations twice gives the same verdict, and
each verdict has its kind (`grader.runtime.results.Outcome`): a judge raises `Fail` (wrong),
`NotDone` (a stub or a missing name) or `GraderFault` (the grader's own failure, never the
learner's). Messages speak the one feedback vocabulary of `workbook.checking.feedback`, and
learner-made text in them is cut short (`show_json`, `show_outcome`, `learner_text`).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from grader.classes import ledger
from grader.runtime.results import Outcome, ProbeRecord
from grader.suites.observe import ARTEFACT_LIMIT, KINDS, SIDECARS, Probes, inputs_seed, tag_of
from grader.suites.observe import JSON as JSON  # re-exported for judges
from workbook.checking.feedback import Message, cut, message, show_json, show_outcome
from workbook.shared.registry import Registry

#: Virtual clocks tick in microseconds (looptime's resolution), so times match to 2 µs.
TIME_TOLERANCE = 2e-6


class Fail(AssertionError):
    """The judge's verdict against the submission. Its text is the learner's feedback."""


class NotDone(Fail):
    """The step is not done yet: a stub still raising NotImplementedError, a missing name."""


class GraderFault(Exception):
    """The grader failed, not the submission (say, both interpreters had the same hash seed):
    the test says nothing about the work, and the result is never cached."""


class Unobserved(Exception):  # a reason, reported as the test's message
    """A probe the judge needs did not finish (timeout, crash, load failure)."""

    def __init__(self, reason: str, kind: Outcome = Outcome.UNFINISHED) -> None:
        super().__init__(reason)
        self.kind = kind


class Observed:
    """The probes' observations of one submission, by name (``observed(name)``;
    ``observed(name, interpreter=2)`` for the second interpreter's), with what the parent
    needs to judge them itself: the exported `source` the worker ran (the seed of seeded
    inputs) and `artefacts`, the folder where the runner copied the worker's files after it
    ended (None until the runner does: then a kept file's embedded copy is read)."""

    def __init__(
        self,
        records: Mapping[str, ProbeRecord],
        *,
        source: str = "",
        artefacts: Path | None = None,
    ) -> None:
        self._records = records
        self.source = source
        self.artefacts = artefacts

    def __call__(self, name: str, interpreter: int = 1) -> JSON:
        key = name if interpreter == 1 else f"{name}@{interpreter}"
        record = self._records.get(key)
        if record is None:
            raise Unobserved(f"probe {key} did not run")
        if record.status != "done":
            raise Unobserved(record.reason or f"probe {key}: {record.status}", record.kind)
        # Timings come from the parent's ledger, never from the child's report.
        return ledger.apply(record.obs, record.ledger, self.artefact)

    def seeded(self, name: str, probes: Probes, interpreter: int = 1) -> tuple[JSON, random.Random]:
        """Seeded probe `name`'s observation, and the parent's own generator of the inputs
        it was given. Fails when the observation was made with other inputs (a recorded one,
        or the worker could not read the answers back)."""
        seen = self(name, interpreter)
        seed = inputs_seed(self.source, probes.salt, name)
        tag = seen.get("seed") if isinstance(seen, dict) else None
        if tag != tag_of(seed):
            raise Fail(
                message(
                    f"probe {name}",
                    "an observation made with other inputs"
                    if tag != "unreadable"
                    else "the probe could not read your exported answers back (linecache)",
                    "the inputs the grader drew for this submission",
                    "Nothing it says can count: whatever wrote it did not run these inputs.",
                )
            )
        return seen, probes.inputs(self.source, name)

    def artefact(self, ref: JSON, suffix: str = "") -> bytes | None:
        """The bytes of a kept file (`grader.suites.observe.keep`'s reference `ref`; `suffix` one of
        `SIDECARS` for those beside it), or None when there is none: read from the
        runner's copy only (a regular file, opened without following a link, at most
        `ARTEFACT_LIMIT` bytes), never from anything the child said."""
        if not isinstance(ref, dict) or not isinstance(ref.get("artefact"), str):
            return None
        if self.artefacts is None:
            return None
        return _read_regular(self.artefacts, ref["artefact"] + suffix)

    @contextlib.contextmanager
    def database(self, ref: JSON) -> Iterator[sqlite3.Connection | None]:
        """A kept SQLite database, opened here, read-only: ``PRAGMA trusted_schema=OFF``, no
        extensions, a bounded amount of work in all (a hostile schema cannot make reading it
        run for ever). None when there is no such file. It is read as SQLite itself would
        open it after the worker ended, whatever state it was left in: a file in rollback
        mode with nothing beside it from memory (no file is written); any other (a WAL-mode
        header, a WAL, a hot journal after a kill, a shared-memory index) from a private copy
        of the file and what was beside it, opened so that SQLite's own recovery runs there
        (a hot journal rolled back, a WAL's committed frames read), then made query-only.
        Honest work never loses a point for how its file was left."""
        main = self.artefact(ref)
        if main is None:
            yield None
            return
        sidecars = {s: self.artefact(ref, s) for s in SIDECARS}
        rollback_mode = main[18:20] == b"\x01\x01" or len(main) < 100  # the header's versions
        with contextlib.ExitStack() as stack:
            db: sqlite3.Connection | None = None
            if rollback_mode and all(data is None for data in sidecars.values()):
                db = sqlite3.connect(":memory:", isolation_level=None)
                try:
                    db.deserialize(main)
                except (sqlite3.Error, OverflowError, ValueError, MemoryError):
                    db.close()
                    db = None
            if db is None:
                folder = Path(tempfile.mkdtemp(prefix="rit-artefact-"))
                stack.callback(shutil.rmtree, folder, ignore_errors=True)
                (folder / "store.sqlite").write_bytes(main)
                for suffix, data in sidecars.items():
                    if data is not None:
                        (folder / f"store.sqlite{suffix}").write_bytes(data)
                # Writable: recovery may need to write (roll a hot journal back); the copy
                # is ours alone, and query_only below keeps everything else from writing.
                db = sqlite3.connect(folder / "store.sqlite", isolation_level=None)
            stack.callback(db.close)
            db.execute("PRAGMA trusted_schema=OFF")
            db.execute("PRAGMA query_only=ON")
            steps = [0]

            def budget() -> int:  # nonzero interrupts the statement running
                steps[0] += 1
                return int(steps[0] > 20_000)

            db.set_progress_handler(budget, 1000)
            yield db


def _read_regular(folder: Path, name: str) -> bytes | None:
    """The file `name` in `folder` if it is a regular file of at most `ARTEFACT_LIMIT`
    bytes (never following a symlink, never blocking on a FIFO), else None."""
    if "/" in name or name.startswith("."):
        return None
    try:
        fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > ARTEFACT_LIMIT:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(ARTEFACT_LIMIT + 1)[:ARTEFACT_LIMIT]
    finally:
        os.close(fd)


JudgeFn = Callable[[Observed], None]


@dataclass(frozen=True)
class Judge:
    name: str
    fn: JudgeFn


class Judges(Registry[Judge]):
    """A hidden suite's judges, one per graded test name."""

    kind = "judge"

    def add(self, name: str) -> Callable[[JudgeFn], JudgeFn]:
        def register(fn: JudgeFn) -> JudgeFn:
            self.register(name, Judge(name, fn))
            return fn

        return register


def judges_of(*modules: ModuleType) -> Judges:
    """The judges of a suite's modules: every top-level ``test_<name>`` function, judging
    graded test `<name>`, in the order the modules and their functions come (plus, for small
    suites written inline, each module's `Judges` registry named ``JUDGES``). The same
    functions pytest collects. A name judged in two modules raises `ValueError`."""
    judges = Judges()
    for module in modules:
        registry = getattr(module, "JUDGES", None)
        own = registry if isinstance(registry, Judges) else Judges()
        for name, value in vars(module).items():
            if name.startswith("test_") and callable(value) and name[5:] not in own:
                own.register(name[5:], Judge(name[5:], value))
        for judge in own:
            judges.register(judge.name, judge)
    return judges


class Verdict(NamedTuple):
    """What a judge decided: the kind of outcome, and the message a learner reads ("" when
    it passed)."""

    kind: Outcome
    message: str

    @property
    def got(self) -> str | None:
        """What came back, when the judge's message says (one `workbook.checking.feedback.message`
        made); None otherwise."""
        return self.message.got if isinstance(self.message, Message) else None


def verdict(judge: Judge, observed: Observed) -> Verdict:
    """`Outcome.PASSED` when the judge is satisfied, else the kind and the message."""
    try:
        judge.fn(observed)
    except NotDone as exc:
        return Verdict(Outcome.NOT_DONE, _said(exc))
    except Fail as exc:
        return Verdict(Outcome.WRONG, _said(exc))
    except Unobserved as exc:
        return Verdict(exc.kind, str(exc))
    except GraderFault as exc:
        return Verdict(Outcome.GRADER_FAULT, str(exc))
    except Exception as exc:
        # The observation is not in the shape its probe makes: the learner's code shares the
        # probe's process and changed or forged it (a judge's own bug shows up in validity,
        # on the solution). Never a grader fault: the learner's process cannot produce one.
        text = (
            "the probe's report is not in the shape the probe makes"
            f" ({type(exc).__name__}: {learner_text(exc)}): nothing in it counts"
        )
        return Verdict(Outcome.WRONG, text)
    return Verdict(Outcome.PASSED, "")


# ---------------------------------------------------------------------------------------
# Reading observations.


def not_done(outcome: Mapping[str, JSON], call: str) -> None:
    """Raise `NotDone` when the outcome is a stub or a missing name."""
    if "missing" in outcome:
        raise NotDone(f"not done yet: `{outcome['missing']}` is not defined in your answer cells")
    if outcome.get("raised") == "NotImplementedError":
        raise NotDone(
            f"not done yet: {call} raised NotImplementedError({outcome.get('message')!r})"
        )


def ok(outcome: Mapping[str, JSON], call: str, expected: str = "a value") -> JSON:
    """The value `call` returned; fail if it raised instead."""
    if "ok" in outcome:
        return outcome["ok"]
    not_done(outcome, call)
    raise Fail(message(call, show_outcome(outcome), f"it returns {expected}"))


def is_kind(outcome: Mapping[str, JSON], kind: str) -> bool:
    """`outcome` raised exactly `kind`: by class name, and (for one of `observe.KINDS`,
    the classes the probes took before the learner's code ran) an instance of that class,
    so a look-alike of the same name is not taken for it."""
    if outcome.get("raised") != kind:
        return False
    kinds = outcome.get("is")
    return kind not in KINDS or (isinstance(kinds, list) and kind in kinds)


def raises(outcome: Mapping[str, JSON], call: str, kind: str, note: str = "") -> None:
    """Fail unless `call` raised exactly `kind` (see `is_kind`)."""
    if is_kind(outcome, kind):
        return
    not_done(outcome, call)
    if outcome.get("raised") == kind:
        origin = "etl" if kind in KINDS and KINDS[kind].__module__.startswith("etl") else ""
        note = (
            f"It is named {kind}, but it is not {origin + '.' if origin else ''}{kind}: raise"
            " (or subclass) that class, do not define one of the same name."
        )
    raise Fail(message(call, show_outcome(outcome), f"raises {kind}", note))


def learner_text(value: JSON) -> str:
    """Text the learner's code made (a type name, a message), cut short for feedback."""
    return cut(str(value), 80)


def _said(exc: Fail) -> str:
    """A judge's verdict as its text, still a `Message` (with its ``got``) when it was one."""
    text = exc.args[0] if len(exc.args) == 1 else None
    return text if isinstance(text, Message) else str(exc)


def same_value(got: JSON, expected: JSON, tolerance: float = 0.0) -> bool:
    """Equal and of exactly the same JSON type, all the way down."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, float):
        return got == expected or math.isclose(got, expected, rel_tol=0.0, abs_tol=tolerance)
    if isinstance(expected, list):
        return len(got) == len(expected) and all(
            same_value(g, e, tolerance) for g, e in zip(got, expected, strict=True)
        )
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            same_value(got[k], expected[k], tolerance) for k in expected
        )
    return bool(got == expected)


def equal(
    call: str,
    got: JSON,
    expected: JSON,
    *,
    tolerance: float = 0.0,
    say: str | None = None,
    note: str = "",
) -> None:
    """Fail unless `got` is `expected` (exact types). `say` describes the expectation in
    words instead of showing the value (for hidden expected values)."""
    if not same_value(got, expected, tolerance):
        expected_text = say if say is not None else show_json(expected)
        raise Fail(message(call, show_json(got), expected_text, note))


def listed(
    value: JSON, count: int, call: str | Callable[[], str], what: str = "results"
) -> list[JSON]:
    """`value` if it is a list of exactly `count` entries, else `Fail`: an observation with
    fewer (or more) entries than the probe makes is not one of its observations. `call` may
    be a function writing the text, called only for the failure (a long trace, say)."""
    if type(value) is not list or len(value) != count:
        got = f"{len(value)} {what}" if type(value) is list else show_json(value)
        text = call() if callable(call) else call
        raise Fail(message(text, got, f"{count} {what}, one per input"))
    return value


def check(condition: bool, call: str, got: str, expected: str, note: str = "") -> None:
    if not condition:
        raise Fail(message(call, got, expected, note))


def is_hex_digest(value: JSON, length: int) -> bool:
    return (
        type(value) is str
        and len(value) == length
        and all(ch in "0123456789abcdef" for ch in value)
    )
