"""Named checks with Exercism-style feedback: the call, what came back, what was expected.

A build's visible checks are written once, as functions of the learner's namespace, and
serve twice: the notebook's self-check cells run them in the kernel (`selfcheck`), and the
visible pytest suite wraps them (`tests/visible`). Async checks run on virtual time.
"""

from __future__ import annotations

import inspect
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal

from workbook import vtime

CheckFn = Callable[[Any], Any]
Status = Literal["passed", "failed", "not done", "error"]
#: Virtual seconds after which an async check is stopped (a retry loop that never gives up).
VIRTUAL_DEADLINE = 3600.0


class CheckFailure(AssertionError):
    """A check saw something other than what it expected. Its text is the whole feedback."""

    def __init__(self, call: str, got: Any, expected: Any, note: str = "") -> None:
        self.call, self.got, self.expected, self.note = call, got, expected, note
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"called:   {self.call}", f"got:      {self.got}", f"expected: {self.expected}"]
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


def show(value: Any) -> str:
    """A value as a learner would type it; exceptions as ``raised Kind('message')``."""
    if isinstance(value, BaseException):
        return f"raised {type(value).__name__}({str(value)!r})"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def expect_equal(call: str, got: Any, expected: Any, note: str = "") -> None:
    """Fail unless `got` equals `expected` and has exactly its type."""
    if type(got) is not type(expected) or got != expected:
        raise CheckFailure(call, show(got), show(expected), note)


def expect(condition: bool, call: str, got: Any, expected: str, note: str = "") -> None:
    """Fail unless `condition`; `expected` describes in words what would have passed."""
    if not condition:
        raise CheckFailure(call, show(got), expected, note)


def expect_raises(
    kinds: type[BaseException] | tuple[type[BaseException], ...],
    call: str,
    fn: Callable[[], Any],
    note: str = "",
) -> BaseException:
    """Call `fn` and return what it raised; fail if it returned or raised another kind."""
    names = " or ".join(k.__name__ for k in (kinds if isinstance(kinds, tuple) else (kinds,)))
    try:
        got = fn()
    except kinds as exc:
        return exc
    except NotImplementedError:
        raise
    except Exception as exc:
        raise CheckFailure(call, show(exc), f"raises {names}", note) from None
    raise CheckFailure(call, f"returned {show(got)}", f"raises {names}", note)


@dataclass(frozen=True)
class Check:
    name: str
    step: str
    fn: CheckFn


@dataclass(frozen=True)
class Result:
    name: str
    step: str
    status: Status
    message: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


class Checks:
    """The visible checks of one build, in the order the notebook introduces them."""

    def __init__(self, build: str) -> None:
        self.build = build
        self._checks: dict[str, Check] = {}

    def add(self, step: str) -> Callable[[CheckFn], CheckFn]:
        """Register the decorated function under its own name, as part of `step`."""

        def register(fn: CheckFn) -> CheckFn:
            self._checks[fn.__name__] = Check(name=fn.__name__, step=step, fn=fn)
            return fn

        return register

    def __iter__(self) -> Iterator[Check]:
        return iter(self._checks.values())

    @property
    def names(self) -> list[str]:
        return list(self._checks)

    @property
    def steps(self) -> list[str]:
        return list(dict.fromkeys(c.step for c in self._checks.values()))

    def select(self, *names_or_steps: str) -> list[Check]:
        """Checks named, or belonging to a step named; all of them when none is given."""
        if not names_or_steps:
            return list(self._checks.values())
        chosen = [
            c for c in self._checks.values() if c.name in names_or_steps or c.step in names_or_steps
        ]
        unknown = set(names_or_steps) - {c.name for c in chosen} - {c.step for c in chosen}
        if unknown:
            raise KeyError(
                f"no check or step named {', '.join(sorted(unknown))} in build {self.build}"
                f" (steps: {', '.join(self.steps)})"
            )
        return chosen

    def run(self, ns: Any, *names_or_steps: str) -> list[Result]:
        return [run_check(check, ns) for check in self.select(*names_or_steps)]


def run_check(check: Check, ns: Any) -> Result:
    """Run one check against the learner's namespace; never raises."""
    start = time.perf_counter()

    def result(status: Status, message: str = "") -> Result:
        return Result(check.name, check.step, status, message, time.perf_counter() - start)

    try:
        outcome = check.fn(ns)
        if inspect.iscoroutine(outcome):
            vtime.run(outcome, deadline=VIRTUAL_DEADLINE)
    except CheckFailure as exc:
        return result("failed", exc.render())
    except NotImplementedError as exc:
        return result("not done", f"not done yet: {exc}" if str(exc) else "not done yet")
    except vtime.VirtualDeadlineExceeded as exc:
        return result("failed", f"it never finished: {exc} (does the loop ever stop?)")
    except AttributeError as exc:
        if getattr(exc, "obj", None) is ns:
            return result(
                "not done", f"`{exc.name}` is not defined yet: run the cell that defines it"
            )
        return result("error", _describe_error(exc))
    except Exception as exc:
        return result("error", _describe_error(exc))
    return result("passed")


def _describe_error(exc: BaseException) -> str:
    """One line for the exception, plus where in the learner's cells it was raised."""
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "[cell " in frame.filename or frame.filename.startswith("<ipython-input"):
            where = f" (at {frame.filename.rsplit('/', 1)[-1]}, line {frame.lineno}: {frame.line})"
            break
        if "ipykernel_" in frame.filename:
            where = f" (in your cell, line {frame.lineno}: {frame.line})"
            break
    return f"raised {type(exc).__name__}: {exc}{where}"


def namespace(values: dict[str, Any]) -> SimpleNamespace:
    """A namespace over a notebook's globals, for checks written as ``ns.content_id(...)``."""
    return SimpleNamespace(**values)


class Said:
    """A value shown verbatim in feedback (``returned 42``), not as a quoted string."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def outcome(fn: Callable[[], Any]) -> tuple[bool, Any]:
    """(True, value) or (False, exception); a stub's NotImplementedError still propagates."""
    try:
        return True, fn()
    except NotImplementedError:
        raise
    except Exception as exc:
        return False, exc


async def outcome_of(awaitable: Awaitable[Any]) -> tuple[bool, Any]:
    """`outcome` for an awaitable."""
    try:
        return True, await awaitable
    except NotImplementedError:
        raise
    except Exception as exc:
        return False, exc


def said(ok: bool, value: Any) -> Said:
    """What a call did, as feedback shows it: ``returned 42`` or ``raised ParseError('…')``."""
    return Said(f"returned {value!r}" if ok else f"raised {type(value).__name__}({str(value)!r})")
