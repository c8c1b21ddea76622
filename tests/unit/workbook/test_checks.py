"""The self-check machinery: per-check status, Exercism-style messages, virtual time."""

from __future__ import annotations

import asyncio
import time
import tomllib
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import ROOT
from workbook import run, run_timed
from workbook.checks import (
    CheckFailure,
    Checks,
    DemoError,
    Said,
    demo,
    expect_equal,
    expect_raises,
)
from workbook.selfcheck import checks_for, hints_for, report_text
from workbook.shared.export import export_source
from workbook.shared.modules import execute, fresh_module
from workbook.vtime import VirtualDeadlineExceeded

CHECKS = Checks("99")


@CHECKS.add(step="double")
def doubles_numbers(ns: Any) -> None:
    expect_equal("double(2)", ns.double(2), 4)


@CHECKS.add(step="double")
def rejects_strings(ns: Any) -> None:
    expect_raises(TypeError, "double('a')", lambda: ns.double("a"))


@CHECKS.add(step="wait")
async def waits_five_seconds(ns: Any) -> None:
    start = asyncio.get_running_loop().time()
    await ns.wait()
    elapsed = asyncio.get_running_loop().time() - start
    expect_equal("await wait() (virtual seconds)", elapsed, 5.0)


def statuses(ns: Any, *names: str) -> dict[str, str]:
    return {r.name: r.status for r in CHECKS.run(ns, *names)}


def test_pass_fail_and_messages() -> None:
    """A wrong answer fails with the call, what came back and what was expected."""
    ns = SimpleNamespace(double=lambda x: x + 2)
    results = {r.name: r for r in CHECKS.run(ns, "double")}
    assert results["doubles_numbers"].passed
    wrong = SimpleNamespace(double=lambda x: x * 3)
    failed = CHECKS.run(wrong, "doubles_numbers")[0]
    assert failed.status == "failed"
    assert failed.message.splitlines() == [
        "called:   double(2)",
        "got:      6",
        "expected: 4",
    ]


def test_stub_is_not_done_not_an_error() -> None:
    def stub(x: int) -> int:
        raise NotImplementedError("write double() first")

    result = CHECKS.run(SimpleNamespace(double=stub), "doubles_numbers")[0]
    assert (result.status, result.message) == ("not done", "not done yet: write double() first")


def test_missing_name_says_which() -> None:
    result = CHECKS.run(SimpleNamespace(), "doubles_numbers")[0]
    assert result.status == "not done" and "`double` is not defined yet" in result.message


def test_exact_type_is_required() -> None:
    """4.0 is not 4: the expected type is part of the answer."""
    result = CHECKS.run(SimpleNamespace(double=lambda x: x * 2.0), "doubles_numbers")[0]
    assert result.status == "failed" and "got:      4.0" in result.message


def test_unexpected_exception_is_one_line_error() -> None:
    result = CHECKS.run(SimpleNamespace(double=lambda x: {}[x]), "doubles_numbers")[0]
    assert result.status == "error" and result.message.startswith("raised KeyError: 2")


def test_async_check_runs_on_virtual_time() -> None:
    async def wait() -> None:
        await asyncio.sleep(5)

    start = time.perf_counter()
    assert statuses(SimpleNamespace(wait=wait), "wait") == {"waits_five_seconds": "passed"}
    assert time.perf_counter() - start < 0.5


def test_async_check_that_never_ends_is_stopped() -> None:
    async def forever() -> None:
        while True:
            await asyncio.sleep(1)

    result = CHECKS.run(SimpleNamespace(wait=forever), "wait")[0]
    assert result.status == "failed" and "never finished" in result.message


def test_unknown_step_is_named() -> None:
    with pytest.raises(KeyError, match="nope"):
        CHECKS.select("nope")


def test_report_ends_with_the_next_hint() -> None:
    results = CHECKS.run(SimpleNamespace(double=lambda x: x * 3), "double")
    text = report_text(results, {"doubles_numbers": "Multiply by two."}, "Self-check:")
    assert text.splitlines()[-1] == "0 of 2 checks pass. Next: Multiply by two."


@CHECKS.add(step="root")
def plain_failure(ns: Any) -> None:
    expect_equal("double(2)", ns.double(2), 4)


@CHECKS.add(step="root")
def waits_on_the_loop_first(ns: Any) -> None:
    raise CheckFailure("wait()", "1 ms of real time", "0", "It waited for real.", cause="blocks")


@CHECKS.add(step="root")
def waits_on_the_loop_again(ns: Any) -> None:
    raise CheckFailure("wait()", "1 ms of real time", "0", "It waited for real.", cause="blocks")


def test_a_declared_root_cause_comes_first_in_the_next_line() -> None:
    """A failure declaring the cause of others is named first, with the cause's hint, even
    after an unrelated failure; a cause the hints do not know changes nothing."""
    results = CHECKS.run(SimpleNamespace(double=lambda x: x * 3), "root")
    assert [r.cause for r in results] == ["", "blocks", "blocks"]
    hints = {"plain_failure": "Multiply by two.", "blocks": "Never block the loop."}
    assert report_text(results, hints, "Self-check:").splitlines()[-1] == (
        "0 of 3 checks pass. Next: blocks, which explains waits_on_the_loop_first and 1 more"
        " failing checks: Never block the loop."
    )
    alone = report_text(results[:2], hints, "Self-check:").splitlines()[-1]
    assert alone.endswith(
        "Next: blocks, which explains waits_on_the_loop_first: Never block the loop."
    )
    del hints["blocks"]
    assert report_text(results, hints, "Self-check:").endswith("Next: Multiply by two.")


def test_a_blocking_sleep_in_with_retry_is_named_as_one() -> None:
    """Build 03's solution with `with_retry` waiting with time.sleep fails every retry check,
    each saying it waited for real; the Next line names the blocking sleep, not the first
    check's own hint (re-raising a permanent error)."""
    known = tomllib.loads((ROOT / "builds/build03/hidden/mutants.toml").read_text("utf-8"))
    bug = next(m for m in known["mutant"] if m["name"] == "time_sleep_instead_of_asyncio_sleep")
    (edit,) = bug["edit"]
    source = export_source(ROOT / "solutions" / "03_build_retry_and_sink.ipynb")
    assert source.count(edit["old"]) == 1
    module = fresh_module("blocking_retry")
    execute(module, source.replace(edit["old"], edit["new"]), "blocking_retry.py")
    results = checks_for("03").run(module)
    failing = [r for r in results if not r.passed]
    assert len(failing) > 1 and all("It waited for real" in r.message for r in failing)
    last = report_text(results, hints_for("03"), "Self-check:").splitlines()[-1]
    assert "Next: sleeps_on_the_event_loop_not_the_thread, which explains" in last, last
    assert "a blocking sleep (time.sleep)" in last and "is_transient" not in last, last


def test_virtual_time_inside_a_running_loop() -> None:
    """Inside a kernel's loop `run` still works: it drives a virtual loop in a thread."""

    async def in_kernel() -> float:
        timed = run_timed(asyncio.sleep(3600, result="late"))
        assert timed.value == "late"
        return timed.elapsed

    assert asyncio.run(in_kernel()) == 3600


def test_virtual_deadline() -> None:
    with pytest.raises(VirtualDeadlineExceeded, match="10 s of virtual time"):
        run(asyncio.sleep(11), deadline=10)


def test_failure_text() -> None:
    assert str(CheckFailure("f()", "1", "2", "note")).endswith("expected: 2\nnote")


def test_a_check_name_is_registered_once() -> None:
    """A copied check cannot silently replace the one before it."""
    checks = Checks("99")
    checks.add(step="one")(doubles_numbers)
    with pytest.raises(ValueError, match="check 'doubles_numbers' declared twice"):
        checks.add(step="two")(doubles_numbers)
    assert checks.names == ["doubles_numbers"] and checks.steps == ["one"]


def test_said_shows_an_outcome_verbatim() -> None:
    """What a call did reads as the grader's feedback says it, unquoted."""
    assert repr(Said.of(True, 42)) == "returned 42"
    assert repr(Said.of(False, KeyError("k"))) == "raised KeyError(\"'k'\")"
    failure = CheckFailure("f()", Said.of(True, "x"), "raises ParseError")
    assert str(failure).splitlines()[1] == "got:      returned 'x'"


# ───────────────────────────────────────────────────────── demo cells


def learner_cells() -> Any:
    """Two functions as a notebook's answer cell defines them (the export's file name)."""
    from workbook.shared.modules import execute, fresh_module

    module = fresh_module("answers")
    source = (
        "def content_key(row):\n    return canonical(row)\n\n\n"
        "def canonical(row):\n    raise ValueError('no canonical form')\n"
    )
    execute(module, source, "/work/03_build.ipynb [cell 15]")
    return module


def test_a_demo_shows_a_learners_error_as_feedback() -> None:
    answers = learner_cells()
    with pytest.raises(DemoError) as caught, demo("a key for every row"):
        answers.content_key({"a": 1})
    lines = caught.value.text.splitlines()
    assert lines[0].startswith("called:   content_key(...), from this demo (line ")
    assert lines[0].endswith('`answers.content_key({"a": 1})`)')
    assert lines[1] == (
        "got:      raised ValueError('no canonical form') in your canonical, line 6:"
        " `raise ValueError('no canonical form')`"
    )
    assert lines[2] == "expected: a key for every row"
    # IPython shows these lines in place of a traceback; the cell still counts as failed.
    assert caught.value._render_traceback_() == lines


def test_a_demo_on_a_stub_says_not_yet(capsys: pytest.CaptureFixture[str]) -> None:
    with demo():
        raise NotImplementedError("content_key: canonical JSON first")
    assert capsys.readouterr().out == "Not yet: content_key: canonical JSON first\n"


def test_a_demo_error_in_the_demos_own_code_names_its_line() -> None:
    with pytest.raises(DemoError) as caught, demo():
        returned: Any = None
        len(returned)
    text = caught.value.text
    assert text.startswith("called:   this demo, on what your answers returned\n")
    assert "raised TypeError(\"object of type 'NoneType' has no len()\") at line" in text
    assert "`len(returned)`" in text
