"""`grader.runtime.protocol`: every message between the runner, its fork servers and their
workers survives its trip, and what is not one is refused."""

from __future__ import annotations

from grader import Limits
from grader.runtime.protocol import Job


def test_a_job_survives_the_trip_to_the_fork_server() -> None:
    job = Job(
        suite="/s/probes.py",
        module="_hidden_probes_s",
        digest="0" * 64,
        probes=("a", "b"),
        build="03",
        limits=Limits().as_json(),
    )
    assert Job.from_json(job.to_json()) == job
