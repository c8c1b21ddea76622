"""HTTP-dates as RFC 9110 spells them, whatever the machine's locale.

`http_date` is a pure function: the same instant and form give the same text on every run.
A `RetryAt` is rendered from the clock reading the response's Date header uses, so Date and
Retry-After always differ by exactly its `seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

DateForm = Literal["imf", "rfc850", "asctime"]

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(when: datetime, form: DateForm = "imf") -> str:
    """`when` (timezone-aware) as an HTTP-date in one of RFC 9110's three forms.

    ``imf`` (``Sun, 06 Nov 1994 08:49:37 GMT``) is the one senders must produce; ``rfc850``
    (``Sunday, 06-Nov-94 08:49:37 GMT``) and ``asctime`` (``Sun Nov  6 08:49:37 1994``) are
    obsolete forms a recipient must still accept. Spelled out by hand, not with ``strftime``,
    because ``%a`` and ``%b`` follow the machine's locale and HTTP does not.
    """
    if when.tzinfo is None:
        raise ValueError("http_date needs a timezone-aware datetime")
    t = when.astimezone(UTC)
    clock = f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    month = _MONTHS[t.month - 1]
    if form == "imf":
        return f"{_DAYS[t.weekday()]}, {t.day:02d} {month} {t.year} {clock} GMT"
    if form == "rfc850":
        return f"{_LONG_DAYS[t.weekday()]}, {t.day:02d}-{month}-{t.year % 100:02d} {clock} GMT"
    if form == "asctime":
        return f"{_DAYS[t.weekday()]} {month} {t.day:>2} {clock} {t.year}"
    raise ValueError(f"unknown HTTP-date form {form!r}")


@dataclass(frozen=True)
class RetryAt:
    """A Retry-After given as an HTTP-date `seconds` after the response's own Date header.

    Rendered when the response is sent, from the app's clock truncated to the second, so a
    client that subtracts the response's Date gets exactly `seconds`.
    """

    seconds: int
    form: DateForm = "imf"

    def render(self, now: datetime) -> str:
        return http_date(now + timedelta(seconds=self.seconds), self.form)

    def __str__(self) -> str:
        return f"{'date' if self.form == 'imf' else self.form}:{self.seconds}"
