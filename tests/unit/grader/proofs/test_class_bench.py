"""The class bench's own figures: the walls' cost per worker, and the class it generates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.proofs import class_bench as bench
from grader.runtime import sandbox

WALLED = pytest.mark.skipif(
    sandbox.walls_problem(sys.executable) is not None, reason="no walls can be raised here"
)


@WALLED
def test_a_trivial_worker_is_timed_walled_in_and_not() -> None:
    walled, bare = bench.worker_seconds(jobs=3)
    # A worker forks twice and loads a module: never free, never a second.
    assert 0.001 < walled < 1.0
    assert 0.001 < bare < 1.0


def test_the_generated_class_is_the_same_on_every_run(tmp_path: Path) -> None:
    first = bench.make_class(tmp_path / "a", 6)
    second = bench.make_class(tmp_path / "b", 6)
    assert first == second
    assert sum(first.values()) == 6 * len([e for e in bench.MANIFEST.graded if e.solution])
    names = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").glob("*/*.ipynb"))
    assert names == sorted(
        p.relative_to(tmp_path / "b") for p in (tmp_path / "b").glob("*/*.ipynb")
    )
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
