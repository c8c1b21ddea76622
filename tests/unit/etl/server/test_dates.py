"""HTTP-dates (`etl.server.dates`): the three RFC 9110 forms, and naive datetimes refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import pytest

from etl.server import RetryAt, http_date

FROZEN = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("form", "text"),
    [
        ("imf", "Fri, 01 Mar 2024 12:00:05 GMT"),
        ("rfc850", "Friday, 01-Mar-24 12:00:05 GMT"),
        ("asctime", "Fri Mar  1 12:00:05 2024"),
    ],
)
def test_the_three_http_date_forms(form: Any, text: str) -> None:
    assert RetryAt(5, form).render(FROZEN) == text
    parsed = parsedate_to_datetime(text)
    # The asctime form carries no zone, so the standard library hands back a naive datetime.
    assert parsed.replace(tzinfo=UTC) == FROZEN + timedelta(seconds=5)


def test_http_date_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        http_date(datetime(2024, 3, 1))


def test_an_aware_time_in_another_zone_is_written_in_gmt() -> None:
    """13:00 at UTC+1 is 12:00 GMT; days and months are English whatever the locale."""
    plus_one = datetime(2024, 3, 1, 13, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    assert http_date(plus_one) == "Fri, 01 Mar 2024 12:00:00 GMT"
    assert http_date(datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC), "rfc850") == (
        "Sunday, 06-Nov-94 08:49:37 GMT"
    )


def test_an_unknown_form_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown HTTP-date form 'iso'"):
        http_date(FROZEN, "iso")  # type: ignore[arg-type]


def test_retry_at_prints_as_the_fault_language_writes_it() -> None:
    """``date:5`` for the IMF form, the form's own name otherwise; ``RetryAt(0)`` renders the
    Date header's own text."""
    assert [str(RetryAt(5)), str(RetryAt(2, "rfc850")), str(RetryAt(1, "asctime"))] == [
        "date:5",
        "rfc850:2",
        "asctime:1",
    ]
    assert RetryAt(0).render(FROZEN) == http_date(FROZEN)
