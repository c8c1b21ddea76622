"""Notebook 08's judges: the answer key, and one judge per question (``test_<name>``), run in
the grading process on the probe's plain JSON copy of ``ANSWERS``.

The key never enters the child, and a judge's message never shows it: a wrong answer is told
that it is wrong and which question to reread (the manifest's hint, which does not give the
answer away, says where to look). Letters are compared without regard to case or order;
numbers must be ints. Judging the same observation twice gives the same verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grader.suites.judging import JSON, Fail, NotDone, Observed, not_done
from workbook.checking.feedback import message, show_json

#: The answer key: (test name, ANSWERS key, the right answer, its form).
KEY: tuple[tuple[str, str, Any, str], ...] = (
    ("q01_separator_collisions", "q01", ["a", "c", "e"], "letters"),
    ("q02_default_key_drops_rows", "q02", 3, "number"),
    ("q03_keys_stable_across_processes", "q03", ["b", "c", "e"], "letters"),
    ("q04_safe_key_sources", "q04", ["b", "d", "f"], "letters"),
    ("q05_accumulating_upsert", "q05", 360, "number"),
    ("q06_destination_enforces_the_key", "q06", "b", "letter"),
    ("q07_piece_number_keys", "q07", 12, "number"),
    ("q08_stale_worker_loses", "q08", "a", "letter"),
    ("q09_crash_under_three_designs", "q09", [28, 33, 30], "numbers"),
    ("q10_poison_or_retryable", "q10", ["b", "d", "e"], "letters"),
    ("q11_page_outcome", "q11", [2, 3, 1], "numbers"),
    ("q12_outbox_repair_scan", "q12", [2, 1], "numbers"),
    ("q13_timeouts_and_breakers", "q13", [400, 3, 100, 1100, 5], "numbers"),
    ("q14_recovery_points", "q14", [1, 1, 2, 1], "numbers"),
    ("q15_end_to_end_request_id", "q15", [3, 2, 1, 2], "numbers"),
)
FORMS = {
    "letters": "a list of letters",
    "letter": "one letter, as a str",
    "number": "a whole number (an int)",
    "numbers": "a list of whole numbers",
}


def normal(value: JSON, form: str) -> Any:
    """The answer in comparable form, or None when it is not in the question's form."""
    if form == "letters":
        if isinstance(value, list) and all(isinstance(v, str) and len(v) == 1 for v in value):
            letters = sorted(v.lower() for v in value)
            return letters if len(set(letters)) == len(letters) else None
        return None
    if form == "letter":
        return value.lower() if isinstance(value, str) and len(value) == 1 else None
    if form == "number":
        return value if type(value) is int else None
    if isinstance(value, list) and all(type(v) is int for v in value):
        return value
    return None


def judge_for(key: str, right: Any, form: str) -> Callable[[Observed], None]:
    call = f"ANSWERS[{key!r}]"

    def judge(observed: Observed) -> None:
        seen = observed("answers")
        not_done(seen, "reading ANSWERS")
        if "ok" not in seen:
            raise Fail(message("ANSWERS", show_json(seen), "a dict of answers"))
        answers = seen["ok"]
        if not isinstance(answers, dict) or key not in answers:
            raise Fail(message(call, "no such entry", f"an answer: {FORMS[form]}"))
        given = answers[key]
        if given is None:
            raise NotDone(f"not done yet: {call} is None (not answered)")
        value = normal(given, form)
        if value is None:
            raise Fail(message(call, show_json(given), FORMS[form]))
        if value != right:
            raise Fail(
                message(
                    call,
                    show_json(given),
                    "another answer (the right one is not shown: this is the graded quiz)",
                    f"Reread question {int(key[1:])} and work it through step by step.",
                )
            )

    return judge


for _name, _key, _right, _form in KEY:
    globals()[f"test_{_name}"] = judge_for(_key, _right, _form)
