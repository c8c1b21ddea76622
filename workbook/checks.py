"""Named checks with Exercism-style feedback: the call, what came back, what was expected.

A build's visible checks are written once, as functions of the learner's namespace, and serve twice:
the notebook's self-check cells run them in the kernel (`selfcheck`), and the visible pytest suite
wraps them (`builds/*/visible`). Async checks run on virtual time. What a failure says is written in
the one feedback vocabulary (`workbook.checking.feedback`), so it reads as the grader's feedback
does.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import time
import traceback
import types
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal

from workbook import vtime
from workbook.checking import feedback
from workbook.shared.registry import Registry

CheckFn = Callable[[Any], Any]
Status = Literal["passed", "failed", "not done", "error"]


class CheckFailure(AssertionError):
    """A check saw something other than what it expected. Its text is the whole feedback:
    ``called:`` / ``got:`` / ``expected:`` lines, then the note (`feedback.message`).

    `cause`, when given, names the graded test (in the manifest) whose failure this one shows
    and which explains every other check failing the same way (a blocking sleep fails each
    check that waits): the report's "Next:" line then names that cause and gives its hint,
    wherever the failure comes in the order of the checks."""

    def __init__(
        self, call: str, got: Any, expected: Any, note: str = "", *, cause: str = ""
    ) -> None:
        self.call, self.got, self.expected, self.note = call, got, expected, note
        self.cause = cause
        super().__init__(feedback.message(call, f"{got}", f"{expected}", note))


def expect_equal(call: str, got: Any, expected: Any, note: str = "") -> None:
    """Fail unless `got` equals `expected` and has exactly its type."""
    if type(got) is not type(expected) or got != expected:
        raise CheckFailure(call, feedback.show(got), feedback.show(expected), note)


def expect(condition: bool, call: str, got: Any, expected: str, note: str = "") -> None:
    """Fail unless `condition`; `expected` describes in words what would have passed."""
    if not condition:
        raise CheckFailure(call, feedback.show(got), expected, note)


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
        raise CheckFailure(call, feedback.said(False, exc), f"raises {names}", note) from None
    raise CheckFailure(call, feedback.said(True, got), f"raises {names}", note)


@dataclass(frozen=True)
class Check:
    name: str
    step: str
    fn: CheckFn


@dataclass(frozen=True)
class CheckResult:
    """How one visible check ended, with its feedback (empty when it passed)."""

    name: str
    step: str
    status: Status
    message: str = ""
    seconds: float = 0.0
    #: The root cause this failure declared (`CheckFailure.cause`); empty for most.
    cause: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


class Checks(Registry[Check]):
    """The visible checks of one build, in the order the notebook introduces them."""

    kind = "check"

    def __init__(self, build: str) -> None:
        super().__init__()
        self.build = build

    def add(self, step: str) -> Callable[[CheckFn], CheckFn]:
        """Register the decorated function under its own name, as part of `step`."""

        def add_check(fn: CheckFn) -> CheckFn:
            self.register(fn.__name__, Check(name=fn.__name__, step=step, fn=fn))
            return fn

        return add_check

    @property
    def steps(self) -> list[str]:
        return list(dict.fromkeys(c.step for c in self))

    def select(self, *names_or_steps: str) -> list[Check]:
        """Checks named, or belonging to a step named; all of them when none is given."""
        if not names_or_steps:
            return list(self)
        chosen = [c for c in self if c.name in names_or_steps or c.step in names_or_steps]
        unknown = set(names_or_steps) - {c.name for c in chosen} - {c.step for c in chosen}
        if unknown:
            raise KeyError(
                f"no check or step named {', '.join(sorted(unknown))} in build {self.build}"
                f" (steps: {', '.join(self.steps)})"
            )
        return chosen

    def run(self, ns: Any, *names_or_steps: str) -> list[CheckResult]:
        return [run_check(check, ns) for check in self.select(*names_or_steps)]


def run_check(check: Check, ns: Any) -> CheckResult:
    """Run one check against the learner's namespace; never raises."""
    start = time.perf_counter()

    def result(status: Status, message: str = "", cause: str = "") -> CheckResult:
        seconds = time.perf_counter() - start
        return CheckResult(check.name, check.step, status, message, seconds, cause)

    try:
        outcome = check.fn(ns)
        if inspect.iscoroutine(outcome):
            vtime.run(outcome, deadline=vtime.VIRTUAL_DEADLINE)
    except CheckFailure as exc:
        return result("failed", str(exc), exc.cause)
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


def _in_a_cell(filename: str) -> bool:
    """A frame of notebook code: an exported cell (``[cell N]``) or a kernel's cell."""
    return "[cell " in filename or "ipykernel_" in filename or filename.startswith("<ipython-")


def _describe_error(exc: BaseException) -> str:
    """One line for the exception, plus where in the learner's cells it was raised."""
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if _in_a_cell(frame.filename):
            place = frame.filename.rsplit("/", 1)[-1] if "[cell " in frame.filename else ""
            at = f"at {place}, line" if place else "in your cell, line"
            where = f" ({at} {frame.lineno}: {frame.line})"
            break
    return f"raised {type(exc).__name__}: {exc}{where}"


class DemoError(Exception):
    """A demo cell stopped on an error raised through the learner's code. Its text is the
    feedback; IPython shows that instead of a traceback (``_render_traceback_``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def _render_traceback_(self) -> list[str]:
        return self.text.splitlines()


@contextlib.contextmanager
def demo(expected: str = "the demo to run to the end") -> Iterator[None]:
    """``with demo():`` around a demo cell's code: a stub's NotImplementedError prints
    ``Not yet: ...``; any other error comes out as called/got/expected feedback naming the
    learner's function and line (a `DemoError`, so the cell still counts as failed), never
    as a traceback through the machinery. Running the cell again runs the demo again."""
    try:
        yield
    except NotImplementedError as todo:
        print("Not yet:", todo)
    except Exception as exc:
        raise DemoError(demo_feedback(exc, expected)) from None


def demo_feedback(exc: BaseException, expected: str) -> str:
    """The feedback for an error that stopped a demo: the learner's function the demo called
    (the outermost frame of another cell), where it raised, what the demo expected."""
    # The walk starts in `demo` itself (it caught the error at its ``yield``): skip it.
    frames = [
        (frame, line)
        for frame, line in traceback.walk_tb(exc.__traceback__)
        if frame.f_code.co_filename not in (__file__, contextlib.__file__)
    ]
    demo_file = frames[0][0].f_code.co_filename if frames else ""
    mine = [
        (frame, line)
        for frame, line in frames
        if frame.f_code.co_filename != demo_file and _in_a_cell(frame.f_code.co_filename)
    ]
    ours = [(f, n) for f, n in frames if f.f_code.co_filename == demo_file]
    if mine:
        called = f"{mine[0][0].f_code.co_qualname}(...), from this demo"
        if ours:
            called += f" (line {ours[-1][1]}: `{_line(ours[-1][0], ours[-1][1])}`)"
        frame, line = mine[-1]
        where = f" in your {frame.f_code.co_qualname}, line {line}: `{_line(frame, line)}`"
    else:
        called = "this demo, on what your answers returned"
        where = f" at line {ours[-1][1]}: `{_line(*ours[-1])}`" if ours else ""
    return feedback.message(
        called,
        feedback.show(exc) + where,
        expected,
        "The self-check above this demo names the behaviour to fix.",
    )


def _line(frame: types.FrameType, lineno: int) -> str:
    text = linecache.getline(frame.f_code.co_filename, lineno, frame.f_globals).strip()
    return feedback.cut(text, 80)


def namespace(values: dict[str, Any]) -> SimpleNamespace:
    """A namespace over a notebook's globals, for checks written as ``ns.content_id(...)``."""
    return SimpleNamespace(**values)


class Said:
    """Text shown verbatim where feedback shows a value (``returned 42``, not ``'returned 42'``):
    a check passes one as the `got` of `expect` when it has already said what happened."""

    def __init__(self, text: str) -> None:
        self.text = text

    @classmethod
    def of(cls, ok: bool, value: Any) -> Said:
        """What a call did (`outcome`'s pair), as feedback says it (`feedback.said`)."""
        return cls(feedback.said(ok, value))

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
