"""Visible check of notebook 08, the graded concept check: the *form* of ``ANSWERS`` only.

The quiz is graded by a hidden judge; nothing here knows which answer is right, so running
this check can never tell a learner whether an answer is correct, only whether the grader will
be able to read it (every question answered, each in the form the question asks for). Running
it twice gives the same verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbook.checking.feedback import cut, show
from workbook.checks import CheckFailure, Checks

CHECKS = Checks("08")


@dataclass(frozen=True)
class Form:
    """What one answer must look like, in words, and the test of it."""

    says: str
    fits: Callable[[Any], bool]


def letters(choices: str) -> Form:
    def fits(value: Any) -> bool:
        return (
            isinstance(value, list)
            and all(isinstance(v, str) and len(v) == 1 and v.lower() in choices for v in value)
            and len({v.lower() for v in value}) == len(value)
        )

    return Form(f'a list of distinct letters from {", ".join(choices)} (e.g. ["a", "c"])', fits)


def one_letter(choices: str) -> Form:
    def fits(value: Any) -> bool:
        return isinstance(value, str) and len(value) == 1 and value.lower() in choices

    return Form(f"one letter from {', '.join(choices)}, as a str", fits)


def number() -> Form:
    return Form("a whole number (an int)", lambda v: type(v) is int)


def numbers(count: int) -> Form:
    def fits(value: Any) -> bool:
        return (
            isinstance(value, list) and len(value) == count and all(type(v) is int for v in value)
        )

    return Form(f"a list of {count} whole numbers", fits)


#: The form of each answer, as each question states it.
FORMS: dict[str, Form] = {
    "q01": letters("abcde"),
    "q02": number(),
    "q03": letters("abcde"),
    "q04": letters("abcdefg"),
    "q05": number(),
    "q06": one_letter("abcd"),
    "q07": number(),
    "q08": one_letter("abcd"),
    "q09": numbers(3),
    "q10": letters("abcdef"),
    "q11": numbers(3),
    "q12": numbers(2),
    "q13": numbers(5),
    "q14": numbers(4),
    "q15": numbers(4),
}


@CHECKS.add(step="answers")
def every_answer_has_the_right_form(ns: Any) -> None:
    answers = ns.ANSWERS
    if not isinstance(answers, dict):
        raise CheckFailure("ANSWERS", cut(repr(answers), 80), "a dict, one entry per question")
    missing = [key for key in FORMS if key not in answers]
    if missing:
        raise CheckFailure(
            "ANSWERS", f"no entry for {', '.join(missing)}", "an entry for every question"
        )
    extra = [key for key in answers if key not in FORMS]
    if extra:
        raise CheckFailure(
            "ANSWERS",
            f"entries {extra} that are not questions",
            f"the keys {', '.join(FORMS)} only",
        )
    blank = [key for key in FORMS if answers[key] is None]
    if blank:
        raise NotImplementedError(f"{', '.join(blank)} still None")
    for key, form in FORMS.items():
        if not form.fits(answers[key]):
            raise CheckFailure(
                f"ANSWERS[{key!r}]",
                show(answers[key]),
                form.says,
                note="This check reads only the form of your answers; whether they are right is"
                " for the grader to say.",
            )
