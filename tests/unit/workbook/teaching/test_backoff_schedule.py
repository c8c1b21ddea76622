"""Backoff schedules, pure and seeded: one client's waits, the herd's crowding, the summary line."""

from __future__ import annotations

import random

import pytest

from workbook.teaching.backoff_schedule import (
    OPENING,
    Schedule,
    Settings,
    crowd,
    herd,
    plural,
    rolling,
    schedule,
    seconds_text,
    summary,
)


def test_rolling_count_matches_counting_by_hand() -> None:
    rng = random.Random(7)
    times = sorted(round(rng.uniform(0, 0.2), 3) for _ in range(60))
    schedules = [Schedule(0, (0.0, t), ()) for t in times]
    edges, counts = rolling(schedules)
    assert len(edges) == len(counts) + 1
    for left, count in zip(edges, counts, strict=False):
        # At each step's start, the retries at most 10 ms old.
        assert count == sum(1 for t in times if t <= left < t + 0.010 + 1e-12)
    brute = max(sum(1 for u in times if 0 <= u - t <= 0.010 + 1e-12) for t in times)
    assert crowd(schedules) == brute


def test_crowd_counts_retries_within_the_window() -> None:
    def at(*times: float) -> Schedule:
        return Schedule(0, (0.0, *times), ())

    assert crowd([at(1.0), at(1.0), at(1.0)]) == 3
    assert crowd([at(1.0), at(1.01), at(1.03)]) == 2
    assert crowd([at(1.0), at(2.0)]) == 1
    assert crowd([]) == 0


def test_schedules_ignore_the_global_random_state() -> None:
    settings = Settings(max_attempts=8, jitter="full", clients=5, seed=9)
    random.seed(1)
    first = herd(settings)
    random.seed(2)
    assert herd(settings) == first


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": 0},
        {"base_delay": 0.0},
        {"cap": -1.0},
        {"jitter": "half"},
        {"retry_after": -1.0},
        {"retry_after": float("inf")},
        {"clients": 0},
    ],
)
def test_settings_reject_nonsense(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Settings(**bad)  # type: ignore[arg-type]


# --- one client's schedule and its summary ----------------------------------------------------


def test_the_seed_policy_doubles_each_wait_from_the_base_delay() -> None:
    one = schedule(Settings())
    assert [w.seconds for w in one.waits] == pytest.approx([0.2, 0.4, 0.8])
    assert one.attempts == pytest.approx((0.0, 0.2, 0.6, 1.4))
    assert one.retries == pytest.approx((0.2, 0.6, 1.4))
    assert one.total_wait == pytest.approx(1.4)
    assert [w.start for w in one.waits] == pytest.approx([0.0, 0.2, 0.6])
    assert [w.end for w in one.waits] == pytest.approx([0.2, 0.6, 1.4])
    assert all(w.source == "backoff" and not w.capped for w in one.waits)


def test_one_attempt_has_no_wait() -> None:
    one = schedule(Settings(max_attempts=1))
    assert one.attempts == (0.0,) and one.waits == () and one.total_wait == 0
    assert summary(Settings(max_attempts=1)) == (
        "1 attempt · 0 sleeps · total wait 0.0 s · cap 10.0 s"
    )


def test_a_jittered_draw_from_a_capped_range_is_capped_but_not_cut() -> None:
    waits = schedule(Settings(max_attempts=9, jitter="full")).waits
    assert [w.capped for w in waits] == [False] * 6 + [True] * 2
    assert not any(w.cut for w in waits)
    # Decorrelated jitter caps after drawing: a draw above the cap becomes the cap, cut.
    decorrelated = schedule(Settings(max_attempts=9, cap=1.0, jitter="decorrelated", seed=5))
    assert [w.cut for w in decorrelated.waits] == [w.seconds == 1.0 for w in decorrelated.waits]
    assert any(w.cut for w in decorrelated.waits)


def test_retry_after_replaces_one_wait_uncapped() -> None:
    one = schedule(Settings(max_attempts=4, retry_after=30.0, retry_after_on=2))
    assert [(w.seconds, w.source) for w in one.waits] == [
        (0.2, "backoff"),
        (30.0, "retry-after"),
        (0.8, "backoff"),
    ]
    assert one.waits[1].computed == pytest.approx(0.4)  # what the backoff would have slept


def test_the_summary_says_what_the_settings_add() -> None:
    assert summary(Settings()) == "4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s"
    assert summary(OPENING) == (
        "9 attempts · 8 sleeps · total wait 32.6 s · cap 10.0 s · cap bites on 2 of 8"
        " · 20 clients, up to 20 retries within 10 ms"
    )
    assert summary(
        Settings(max_attempts=5, jitter="full", seed=3, retry_after=2.5, retry_after_on=2)
    ).endswith(" · Retry-After 2.5 s after attempt 2 · full jitter, seed 3")
    assert summary(Settings(max_attempts=3, retry_after=5.0, retry_after_on=3)).endswith(
        " · Retry-After after attempt 3: never reached"
    )


def test_seconds_and_counts_read_as_the_explorer_writes_them() -> None:
    assert [seconds_text(s) for s in (0.2, 0.96, 0.0, 12.345)] == ["0.20", "1.0", "0.0", "12.3"]
    assert (plural(1, "attempt"), plural(2, "attempt")) == ("1 attempt", "2 attempts")


def test_every_problem_with_the_settings_is_named_at_once() -> None:
    with pytest.raises(ValueError) as raised:
        Settings(max_attempts=0, cap=0)
    assert str(raised.value) == "max_attempts must be 1..50, got 0; cap must be > 0 s, got 0"
