"""A generated class for timing class grading: ``python -m grader.bench [--learners 100]``.

Each learner hands in every graded build that has a solution, each one drawn (seeded, so the
class is the same on every run) from: the solution; the solution with one known bug (a mutant
of the build's hidden suite, applied to the answer cells); the untouched stubs; a notebook that
is broken (a syntax error, not JSON, an exception when it loads); or nothing. Two learners
hang, one at load and one in a function, as a real class would have. Every notebook carries a
comment of its learner's own, so no two are the same cells (identical ones run only once).

It first keeps the known bugs' signatures (`grader.classes.reteach`; once per grader version, not
timed), then grades the class cold (empty cache), then again (every grade from the cache),
then once more after one learner changes one build, and prints the times: the cold run's CPU split
between this process (reading, judging, caching, writing) and the workers, and what the walls
add to one worker (the smallest job, timed walled in and not). ``--without-learner-tests``
grades the answers only: ARC.md's target of 0.8 s a learner cold counts those alone (1.6 s
with the learners' tests). ``--walls off`` grades the whole class without walls, to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grader.classes import reteach
from grader.classes.batch import grade_class
from grader.classes.grades import ClassReport
from grader.learner_tests.wheats import probe_suite
from grader.runtime import sandbox
from grader.runtime.runner import Runner, WallsUnavailable
from grader.runtime.sandbox import WallsMode
from grader.suites.loading import has_suite, load_suite
from workbook.shared.errors import WorkbookError
from workbook.shared.export import cell_source, cell_tags, export_source
from workbook.shared.manifest import load_manifest

MANIFEST = load_manifest()
ROOT = MANIFEST.root  # the instructor repository this bench grades against
SUBMISSION_KINDS = ("solution", "mutant", "stub", "broken", "missing")
WEIGHTS = (40, 35, 10, 10, 5)


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _answers(nb: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "answer" in cell_tags(c)]


def mutated(solution: dict[str, Any], edits: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The solution with each edit made inside the one answer cell holding its text."""
    nb: dict[str, Any] = json.loads(json.dumps(solution))
    for old, new in edits:
        cells = [c for c in _answers(nb) if old in cell_source(c)]
        if len(cells) != 1:
            return None
        cells[0]["source"] = cell_source(cells[0]).replace(old, new, 1)
    return nb


def broken(exercise: dict[str, Any], solution: dict[str, Any], rng: random.Random) -> str:
    how = rng.choice(("syntax", "not json", "raises"))
    if how == "not json":
        return '{"cells": [ oops'
    nb = json.loads(json.dumps(solution))
    cell = _answers(nb)[-1]
    extra = "def broken(:\n    pass" if how == "syntax" else "raise RuntimeError('half done')"
    cell["source"] = cell_source(cell) + "\n\n" + extra + "\n"
    return json.dumps(nb)


def hanging(solution: dict[str, Any], where: str) -> str:
    nb = json.loads(json.dumps(solution))
    cell = _answers(nb)[0 if where == "load" else -1]
    if where == "load":
        cell["source"] = "while True:\n    pass\n\n" + cell_source(cell)
    else:  # every function of the first answer cell hangs when called
        cell["source"] = cell_source(cell).replace(
            '"""\n', '"""\n    while True:\n        pass\n', 1
        )
    return json.dumps(nb)


def _valid(path: Path) -> bool:
    try:
        export_source(path)
    except WorkbookError:
        return False
    return True


def _own(text: str, learner: str) -> str:
    """The notebook with a comment of the learner's own in its first answer cell and its first
    test cell: no two learners hand in the same answers or the same tests (the grader would
    run identical ones only once)."""
    try:
        nb = json.loads(text)
    except ValueError:
        return text
    for tag in ("answer", "test"):
        cells = [c for c in nb["cells"] if c["cell_type"] == "code" and tag in cell_tags(c)]
        if cells:
            cells[0]["source"] = f"# {learner} was here\n" + cell_source(cells[0])
    return json.dumps(nb)


def make_class(folder: Path, learners: int, seed: int = 2024) -> dict[str, int]:
    """Write `learners` folders into `folder`; returns how many notebooks of each kind."""
    rng = random.Random(seed)
    counts = dict.fromkeys((*SUBMISSION_KINDS, "hang"), 0)
    builds = [e for e in MANIFEST.graded if e.solution and (ROOT / e.solution).exists()]
    sources = {e.number: (_read(ROOT / e.path), _read(ROOT / str(e.solution))) for e in builds}
    mutants = {e.number: load_suite(e.number).mutants for e in builds}
    for index in range(learners):
        home = folder / f"learner{index:03d}"
        home.mkdir(parents=True)
        for entry in builds:
            exercise, solution = sources[entry.number]
            kind = rng.choices(SUBMISSION_KINDS, WEIGHTS)[0]
            text: str | None
            if index in (learners // 3, 2 * learners // 3) and entry == builds[0]:
                kind, text = "hang", hanging(solution, "load" if index == learners // 3 else "fn")
            elif kind == "solution":
                text = json.dumps(solution)
            elif kind == "stub":
                text = json.dumps(exercise)
            elif kind == "broken":
                text = broken(exercise, solution, rng)
            elif kind == "mutant" and mutants[entry.number]:
                mutant = rng.choice(mutants[entry.number])
                nb = mutated(solution, [(e.old, e.new) for e in mutant.edits])
                kind, text = (
                    ("mutant", json.dumps(nb)) if nb else ("solution", json.dumps(solution))
                )
            else:
                kind, text = "missing", None
            counts[kind] += 1
            if text is not None:
                text = _own(text, home.name)
                (home / Path(entry.path).name).write_text(text, encoding="utf-8")
    return counts


def machine_cpu() -> float:
    """CPU seconds the machine has spent busy (user, nice and system), from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()[1:4]
    return sum(map(int, fields)) / os.sysconf("SC_CLK_TCK")


#: What the learner-test probe reports for a test that passed.
PASSED = {"loaded": True, "defined": True, "passed": True}


#: Jobs each server runs before timing starts (its first imports the probe).
WARMUP = 3


def worker_seconds(jobs: int = 40) -> tuple[float, float]:
    """The median wall time of one trivial worker walled in (bwrap) and without walls: a
    two-line module and one learner test that passes, the smallest job a batch runs (and the
    most common). The two kinds alternate, so a drift of the machine's speed touches both
    alike; the first jobs, while each server imports the probe, are left out."""
    from grader.learner_tests.wheatprobe import JOB

    job = {"name": "test_it", "text": "def test_it():\n    assert 1 + 1 == 2\n", "max_examples": 1}
    source = f"def answer() -> int:\n    return 2\n\n{JOB} = {job!r}\n"
    suite = probe_suite("03")
    times: dict[WallsMode, list[float]] = {"bwrap": [], "off": []}
    with contextlib.ExitStack() as stack:
        runners = {w: stack.enter_context(Runner(walls=w, learner_tests=True)) for w in times}
        for runner in runners.values():
            runner.start()
        for n in range(jobs + WARMUP):
            for walls, runner in runners.items():
                start = time.perf_counter()
                run = runner.run_probes(source, suite)
                elapsed = time.perf_counter() - start
                runner.discard(run)
                record = run.records.get("learner_test")
                if record is None or record.status != "done" or record.obs != PASSED:
                    raise RuntimeError(f"the trivial worker did not pass (walls {walls}): {record}")
                if n >= WARMUP:
                    times[walls].append(elapsed)
    return statistics.median(times["bwrap"]), statistics.median(times["off"])


def own_cpu() -> float:
    """CPU seconds this process has spent (every thread), never its children's."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench", description=__doc__)
    parser.add_argument("--learners", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    parser.add_argument(
        "--keep", type=Path, default=None, help="copy the cold run's grades.csv and summaries here"
    )
    parser.add_argument(
        "--without-learner-tests",
        action="store_true",
        help="grade the answers only (the learners' test cells are left ungraded)",
    )
    parser.add_argument("--walls", choices=("bwrap", "off"), default="bwrap")
    args = parser.parse_args(argv)
    walls: WallsMode = args.walls
    problem = sandbox.walls_problem(sys.executable) if walls == "bwrap" else None
    if problem is not None:  # said before any grading, not as a traceback after it
        print(f"{sandbox.refusal(problem)}\nTo time grading without walls: --walls off.")
        return 2
    manifest = MANIFEST
    if args.without_learner_tests:
        entries = tuple(dataclasses.replace(e, learner_tests=()) for e in MANIFEST.entries)
        manifest = dataclasses.replace(MANIFEST, entries=entries)

    def grade(submissions: Path, out: Path) -> ClassReport:
        return grade_class(submissions, out, workers=args.workers, manifest=manifest, walls=walls)

    with tempfile.TemporaryDirectory(prefix="rit-bench-") as tmp:
        submissions, out = Path(tmp) / "class", Path(tmp) / "grades"
        counts = make_class(submissions, args.learners)
        load = os.getloadavg()
        tests = "answers only" if args.without_learner_tests else "answers and learner tests"
        print(f"{args.learners} learners ({tests}, walls {walls}); notebooks by kind: {counts}")
        # Once per grader version (make check's validity leaves them): not class grading's cost.
        start = time.perf_counter()
        builds = manifest.root / "builds"
        made = reteach.keep_signatures(
            [e for e in manifest.graded if has_suite(e.number, builds)],
            manifest.root,
            builds,
            walls,
        )
        kept = f"graded for {made} build(s)" if made else "kept from an earlier run"
        print(f"known bugs' signatures: {kept} ({time.perf_counter() - start:.1f} s, not timed)")
        before, mine, start = machine_cpu(), own_cpu(), time.perf_counter()
        cold = grade(submissions, out)
        cold_s, after, mine = time.perf_counter() - start, machine_cpu(), own_cpu() - mine
        csv_bytes = (out / "grades.csv").read_bytes()
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for name in ("grades.csv", "summary.csv", "summary.md"):
                (args.keep / name).write_bytes((out / name).read_bytes())
        start = time.perf_counter()
        warm = grade(submissions, out)
        warm_s = time.perf_counter() - start
        same = (out / "grades.csv").read_bytes() == csv_bytes
        changed = next(p for p in sorted(submissions.glob("*/*.ipynb")) if _valid(p))
        nb = _read(changed)
        cell = _answers(nb)[0]
        cell["source"] = cell_source(cell) + "\n# one more comment\n"
        changed.write_text(json.dumps(nb), encoding="utf-8")
        start = time.perf_counter()
        one = grade(submissions, out)
        one_s = time.perf_counter() - start
    n = args.learners
    print(
        f"cold:   {cold_s:6.2f} s for {n} learners ({cold_s / n:.3f} s per learner,"
        f" {cold.graded} notebooks run: {cold_s / max(cold.graded, 1):.3f} s per notebook)"
    )
    # The whole machine's, not this process's children's: a worker is reaped inside its own
    # PID namespace, so its time never reaches os.times() here.
    cpu = after - before
    print(
        f"        {cpu:6.2f} CPU s of the machine, anything else running included"
        f" ({cpu / n:.3f} per learner) on {os.cpu_count()} cores; load average before:"
        f" {load[0]:.2f}"
    )
    print(
        f"        of which this process (reading, judging, caching, writing): {mine:.2f} CPU s;"
        " the workers and their servers: the rest"
    )
    print(
        f"cached: {warm_s:6.2f} s ({warm.graded} run, {warm.from_cache} from the cache);"
        f" grades.csv byte for byte the same: {same}"
    )
    print(f"one changed notebook: {one_s:6.2f} s ({one.graded} run)")
    jobs = 40
    try:
        walled, bare = worker_seconds(jobs)
    except (WallsUnavailable, RuntimeError) as exc:
        print(f"walls: their cost per worker not measured: {exc}")
    else:
        print(
            f"walls: one trivial worker takes {walled * 1000:.1f} ms walled in (bwrap),"
            f" {bare * 1000:.1f} ms without: {(walled - bare) * 1000:.1f} ms a worker"
            f" (medians of {jobs})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
