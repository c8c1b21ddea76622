"""Choosing a per-attempt timeout from the latencies of healthy calls.

A timeout is a bet on how long a healthy answer can take. Marc Brooker's rule ("Timeouts,
retries, and backoff with jitter", Amazon Builders' Library) makes the bet explicit: pick the
share of healthy calls you accept to cut off by mistake (say 0.1%), then set the timeout at the
matching percentile of the dependency's measured latency (p99.9). `percentile` reads that off
a sample; `timeout_for` does both steps. A sample must be large enough to hold the tail it is
asked about: under 1,000 answers, a nearest-rank p99.9 is simply the slowest one.

Both are pure: the same sample gives the same answer, in any order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(samples: Iterable[float], p: float) -> float:
    """The nearest-rank `p`-th percentile (0 < p <= 100): the smallest sample with at least
    `p` percent of the samples at or below it. Raises `ValueError` on an empty sample or a `p`
    out of range."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples: measure some healthy calls first")
    if not 0 < p <= 100:
        raise ValueError(f"p must be in (0, 100], not {p}")
    # round() first: 99.9 / 100 * 1000 is 999.0000000000001, whose ceiling would skip a rank.
    rank = math.ceil(round(p / 100 * len(ordered), 9))
    return ordered[max(rank, 1) - 1]


def timeout_for(latencies: Iterable[float], false_timeouts: float = 0.001) -> float:
    """The per-attempt timeout that would have cut off about `false_timeouts` of these healthy
    calls: their ``100 * (1 - false_timeouts)``-th percentile (p99.9 for the default 0.1%).

    `latencies` are seconds of calls that answered; a call that never answered says nothing
    about how long a healthy one takes, so leave it out.
    """
    if not 0 < false_timeouts < 1:
        raise ValueError(f"false_timeouts is a share of calls (0 to 1), not {false_timeouts}")
    return percentile(latencies, 100 * (1 - false_timeouts))
