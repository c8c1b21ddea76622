"""`grader.suites.observe`: what a probe makes of what it saw: plain JSON, exceptions by
name, virtual time."""

from __future__ import annotations

import math

from grader.suites.observe import attempt, plain, vrun


class LyingStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def test_plain_keeps_exact_json_types_and_tags_the_rest() -> None:
    assert plain([1, 1.5, True, None, "x", (2, 3), {"k": [4]}]) == [
        1,
        1.5,
        True,
        None,
        "x",
        [2, 3],
        {"k": [4]},
    ]
    assert plain(math.nan) == {"float": "nan"}
    assert plain(-math.inf) == {"float": "-inf"}
    lying = plain(LyingStr("abc"))
    assert lying == {"type": "LyingStr", "repr": "'abc'"}
    assert plain({1: "x"})["type"] == "dict"  # keys JSON cannot hold


def test_plain_survives_a_repr_that_raises() -> None:
    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert plain(Bad()) == {
        "type": "test_plain_survives_a_repr_that_raises.<locals>.Bad",
        "repr": "<test_plain_survives_a_repr_that_raises.<locals>.Bad (its repr raised)>",
    }


def test_attempt_reports_exceptions_by_name_and_missing_names() -> None:
    assert attempt(lambda: 1 / 0) == {
        "raised": "ZeroDivisionError",
        "message": "division by zero",
        "is": [],
    }
    assert attempt(lambda: 42) == {"ok": 42}

    def exits() -> None:
        raise SystemExit(3)

    assert attempt(exits)["raised"] == "SystemExit"


def test_vrun_reports_virtual_time_and_blocking_sleeps() -> None:
    import asyncio

    async def waits(clock: object) -> str:
        await asyncio.sleep(5)
        return "done"

    seen = vrun(waits)
    assert seen.pop("vrun") is None  # no ledger outside a grading worker (grader.classes.ledger)
    assert (seen["ok"], seen["elapsed"], seen["blocking"]) == ("done", 5.0, 0.0)
    assert seen["real"] < 1.0

    async def forever(clock: object) -> None:
        while True:
            await asyncio.sleep(60)

    stopped = vrun(forever, deadline=600)
    assert stopped.pop("real") < 1.0
    stopped.pop("vrun")
    assert stopped == {
        "raised": "VirtualDeadline",
        "message": "still running after 600 s",
        "elapsed": 600.0,
        "blocking": 0.0,
    }
