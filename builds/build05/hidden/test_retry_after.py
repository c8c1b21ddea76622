"""Build 05's judges of parse_retry_after (step 1): delay-seconds and the three
HTTP-date forms, malformed values, dates in the past.
"""

from __future__ import annotations

from builds.build05.hidden import probes as P
from builds.build05.hidden.expected import (
    date_seconds,
    judge_retry_after,
    retry_call,
    seconds_until,
    seeded,
    value_of,
)
from grader.suites.judging import Observed, equal, listed
from workbook.checking.feedback import show_json


def test_retry_after_reads_seconds_and_dates(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_reads_seconds_and_dates")
    delay, dates = P.draw_delay(rng), P.draw_dates(rng, 2, 1, 10**6)
    values = ("120", "45", delay)
    for value, got in zip(values, listed(seen["seconds"], 3, "parse_retry_after"), strict=True):
        judge_retry_after(got, value, float(value), "ASCII digits are seconds, as a float.")
    offsets = (*P.DATE_OFFSETS[:3], *dates)
    for (offset, form), got in zip(
        offsets, listed(seen["dates"], len(offsets), "parse_retry_after"), strict=True
    ):
        text = P.date_text(offset, form)
        note = "A naive result (asctime) is UTC: .replace(tzinfo=UTC)." if form == "asctime" else ""
        judge_retry_after(got, text, date_seconds(offset, P.NOW), note)
    judge_retry_after(seen["past"], P.date_text(-60, "imf"), 0.0, "Never negative.")
    judge_retry_after(seen["none"], None, None)


def test_malformed_retry_after_is_none(observed: Observed) -> None:
    seen, rng = seeded(observed, "malformed_retry_after_is_none")
    values = [*P.MALFORMED, *P.NOT_DELAY_SECONDS, *P.drawn(rng, P.draw_malformed)]
    more = P.drawn(rng, P.draw_malformed)
    answers = listed(seen["values"], len(values), "values") + listed(seen["more"], len(more), "")
    for value, got in zip([*values, *more], answers, strict=True):
        judge_retry_after(
            got,
            value,
            seconds_until(value, P.NOW),
            "A Retry-After that is neither form is as good as none.",
        )


def test_retry_after_reads_all_three_date_forms(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_reads_all_three_date_forms")
    drawn_now, dates = P.draw_now(rng), P.draw_dates(rng, 6, 0, 10**7)
    note = (
        "Read every form with parsedate_to_datetime; the asctime form comes back naive, and it"
        " is UTC, on a machine in any time zone (this one is 5.5 h from UTC)."
    )
    for now, key, offsets in (
        (P.NOW, "now", P.DATE_OFFSETS),
        (P.NOW_FRACTION, "fraction", P.DATE_OFFSETS),
        (drawn_now, "drawn", tuple(dates)),
    ):
        answers = listed(seen[key], len(offsets), "parse_retry_after of each date")
        for (offset, form), got in zip(offsets, answers, strict=True):
            text = P.date_text(offset, form, now)
            call = retry_call(text, now)
            expected = date_seconds(offset, now)
            equal(
                call, value_of(got, call, show_json(expected)), expected, tolerance=1e-9, note=note
            )
    naive_now, naive_dates = P.naive_inputs(rng)
    answers = listed(seen["naive_now"], len(naive_dates), "parse_retry_after of each date")
    for (offset, form), got in zip(naive_dates, answers, strict=True):
        text = P.date_text(offset, form, naive_now)
        call = f"parse_retry_after({text!r}, now={naive_now.replace(tzinfo=None)!r}), a naive now"
        expected = date_seconds(offset, naive_now)
        equal(
            call,
            value_of(got, call, show_json(expected)),
            expected,
            tolerance=1e-9,
            note="A naive now is UTC too, like a naive date: make it aware with"
            " .replace(tzinfo=UTC) before subtracting (naive minus aware is a TypeError).",
        )


def test_delay_seconds_are_ascii_digits_only(observed: Observed) -> None:
    seen, rng = seeded(observed, "delay_seconds_are_ascii_digits_only")
    digits = (*P.DELAY_SECONDS, P.draw_delay(rng), f" {P.draw_delay(rng)} ")
    for value, got in zip(digits, listed(seen["digits"], len(digits), "values"), strict=True):
        judge_retry_after(got, value, float(int(value)), "ASCII digits: float(int(text)).")
    not_digits = listed(seen["not_digits"], len(P.NOT_DELAY_SECONDS), "values")
    for value, got in zip(P.NOT_DELAY_SECONDS, not_digits, strict=True):
        judge_retry_after(
            got,
            value,
            None,
            "delay-seconds is 1*DIGIT, ASCII digits only: no sign, point, underscore, unit or"
            " other script's digits (str.isdigit() and int() accept some of those).",
        )


def test_retry_after_in_the_past_is_zero(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_in_the_past_is_zero")
    offsets = (*P.PAST_OFFSETS, *P.draw_dates(rng, rng.randint(*P.DRAWN), -(10**8), -1))
    more = P.draw_dates(rng, rng.randint(*P.DRAWN), -(10**8), -1)
    answers = listed(seen["past"], len(offsets), "dates") + listed(seen["more"], len(more), "")
    for (offset, form), got in zip([*offsets, *more], answers, strict=True):
        judge_retry_after(got, P.date_text(offset, form), 0.0, "A date already past is 0.0.")
    judge_retry_after(seen["zero"], "0", 0.0)
    judge_retry_after(seen["long_ago"], "Sun, 06 Nov 1994 08:49:37 GMT", 0.0)
