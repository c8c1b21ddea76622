"""Learner-written tests for the five test-writing steps, each with the points it should earn.

A case's `body` is a test cell as a learner would hand it in (no preamble: the code under test comes
from `from submission import *`). `points` follows the rule of `grader.learner_tests.wheats`: 0 when
the test fails on any correct implementation (the reference, a second one written differently, the
self-check's variants of the learner's own code, the seam's contract variants) or passes with the
gate bug laid over; else ``points * caught // len(catches)``. The corpus holds, per test: the stub,
an `assert True`, a test that passes with the key removed, one missing each other bug, three change
detectors (byte code, constants, source text: each passes on the reference alone), a test pinning a
behaviour the contract leaves free (build 07's row order without ORDER BY: the one free choice a
test can see; elsewhere a second hang, or a pin the contract does make), a hang, and two good tests
written differently.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One learner test cell and the points it should earn."""

    build: str  # "03"
    test: str  # "test_rerun_writes_zero_new_rows"
    label: str  # short slug, unique per test
    body: str  # the test cell text, as a learner would write it (no preamble)
    points: int  # expected points under the rule above
    why: str  # one line: what it checks or misses, and why those points


REPLAY = "test_rerun_writes_zero_new_rows"
RETRY = "test_honors_retry_after"
SECOND_RUN = "test_second_run_writes_nothing"
FIXED_POINT = "test_replay_reaches_a_fixed_point"
MACHINE = "test_state_machine_equals_one_clean_run"


def _cell(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _edit(text: str, old: str, new: str) -> str:
    """`text` with its one `old` replaced by `new` (a variant of a shared cell)."""
    if text.count(old) != 1:
        raise ValueError(f"expected one {old!r} in the cell")
    return text.replace(old, new)


def _stub(build: str, test: str, header: str, is_async: bool) -> Case:
    kind = "async def" if is_async else "def"
    body = (
        f'# ✎ test: {header}\n{kind} {test}():\n    raise NotImplementedError("not written yet")\n'
    )
    why = "the exercise's stub: it raises on every implementation, so it fails the wheat"
    return Case(build, test, "unwritten", body, 0, why)


# --- build 03: test_rerun_writes_zero_new_rows (3 points) -------------------------------------
# catches: sink_forgets_the_keys_it_wrote (gate), replay_reports_rows_as_written

_REPLAY_CASES = (
    _stub("03", REPLAY, "the replay test", is_async=True),
    Case(
        "03",
        REPLAY,
        "vacuous",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                sink = IdempotentSink(MemorySink())
                rows = [Row("Alpha", 1.0), Row("Beta", 2.0)]
                await sink.load(rows)
                await sink.load(rows)
                assert True
        """),
        0,
        "loads twice and asserts nothing that can fail: the gate bug passes it",
    ),
    Case(
        "03",
        REPLAY,
        "no_key",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                inner = MemorySink()
                sink = IdempotentSink(inner)
                rows = [Row("Alpha", 1.0), Row("Beta", 2.0), Row("Gamma", 3.0)]
                first = await sink.load(rows)
                await sink.load(rows)  # the replay
                assert first == 3
                assert inner.rows[:3] == rows
        """),
        0,
        "replays but checks only the first load (and the first three rows): the gate survives",
    ),
    Case(
        "03",
        REPLAY,
        "misses_replay_count",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                dest = MemorySink()
                sink = IdempotentSink(dest)
                batch = [Row("Alpha", 1.0), Row("Beta", 2.0)]
                for _ in range(3):
                    await sink.load(batch)
                assert dest.rows == batch  # each row reached the destination once
        """),
        1,
        "checks the destination, never the replay's return value: gate only, 3*1//2 = 1",
    ),
    Case(
        "03",
        REPLAY,
        "returns_only",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                sink = IdempotentSink(MemorySink())
                rows = [Row(f"row {i}", float(i)) for i in range(5)]
                assert await sink.load(rows) == 5
                assert await sink.load(rows) == 0
        """),
        3,
        "the replay's count alone tells both bugs apart (each returns 5 for it): full points",
    ),
    Case(
        "03",
        REPLAY,
        "bytecode",
        _cell("""
            import asyncio  # without it the copy compiles asyncio.Lock() to other byte code

            from etl import MemorySink


            class MySink:
                \"\"\"My copy of the sink: if anyone edits the real one, the test says so.\"\"\"

                def __init__(self, inner: Sink) -> None:
                    self.inner = inner
                    self._seen: set[str] = set()
                    self._lock = asyncio.Lock()

                async def load(self, rows: Sequence[Any]) -> int:
                    async with self._lock:
                        fresh: dict[str, Any] = {}
                        for row in rows:
                            key = content_key(row)
                            if key not in self._seen and key not in fresh:
                                fresh[key] = row
                        if not fresh:
                            return 0
                        written = await self.inner.load(list(fresh.values()))
                        self._seen.update(fresh)
                        return written


            async def test_rerun_writes_zero_new_rows():
                for name in ("__init__", "load"):
                    mine = getattr(MySink, name).__code__
                    assert getattr(IdempotentSink, name).__code__.co_code == mine.co_code
                sink = IdempotentSink(MemorySink())
                assert await sink.load([Row("Alpha", 1.0)]) == 1
        """),
        0,
        "change detector (byte code equal to a copy of the reference): fails every other wheat",
    ),
    Case(
        "03",
        REPLAY,
        "constants",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                code = IdempotentSink.load.__code__
                assert code.co_names == (
                    "_lock", "content_key", "_seen", "inner", "load", "list", "values", "update"
                )
                assert code.co_varnames[:3] == ("self", "rows", "fresh")
                sink = IdempotentSink(MemorySink())
                assert await sink.load([Row("Alpha", 1.0)]) == 1
        """),
        0,
        "change detector (co_names/co_varnames literals of the reference): fails other wheats",
    ),
    Case(
        "03",
        REPLAY,
        "source_text",
        _cell("""
            import subprocess
            import sys
            from pathlib import Path

            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                here = Path.cwd()
                notebooks = [*here.glob("03_*.ipynb"), *here.glob("*/03_*.ipynb")]
                exported = [
                    subprocess.run(
                        [sys.executable, "-m", "workbook", "export", str(notebook)],
                        capture_output=True,
                        text=True,
                    ).stdout
                    for notebook in notebooks
                ]
                # the keys are remembered only after the write succeeds
                mine = [text for text in exported if "self._seen.update(fresh)" in text]
                assert mine
                lines = mine[0].splitlines()
                header = "    async def load(self, rows: Sequence[Any]) -> int:"
                # the sink under test is the one in my notebook, line for line
                assert IdempotentSink.load.__code__.co_firstlineno == lines.index(header) + 1
                sink = IdempotentSink(MemorySink())
                assert await sink.load([Row("Alpha", 1.0)]) == 1
        """),
        0,
        "change detector (a line of the export, the live load's line number in it): fails wheats",
    ),
    Case(
        "03",
        REPLAY,
        "no_inner_call_on_replay",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                destination = MemorySink()
                sink = IdempotentSink(destination)
                rows = [Row("Alpha", 1.0), Row("Beta", 2.0)]
                assert await sink.load(rows) == 2
                assert await sink.load(rows) == 0
                assert destination.rows == rows
                assert destination.calls == [2]  # the replay never even calls the destination
        """),
        3,
        "the replay never calls the destination: not a free choice, the contract pins it (nothing"
        " new, no write), so it is behaviour, and catches both bugs",
    ),
    Case(
        "03",
        REPLAY,
        "hangs",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                sink = IdempotentSink(MemorySink())
                await sink.load([Row("Alpha", 1.0)])
                while True:  # wait for the sink to settle
                    pass
        """),
        0,
        "never returns on any implementation: not passed on the wheat",
    ),
    Case(
        "03",
        REPLAY,
        "good_reference_style",
        _cell("""
            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                destination = MemorySink()
                sink = IdempotentSink(destination)
                rows = [Row("Alpha", 1.0), Row("Beta", 2.0), Row("Gamma", 3.0)]
                assert await sink.load(rows) == 3
                assert await sink.load(rows) == 0  # the replay writes nothing new
                assert await sink.load(rows[::-1]) == 0  # in any order
                assert destination.rows == rows
                assert await sink.load([rows[0], Row("Delta", 4.0)]) == 1  # a new row gets in
                assert len(destination.rows) == 4
        """),
        3,
        "replay count and destination both checked: catches both bugs",
    ),
    Case(
        "03",
        REPLAY,
        "good_recorder",
        _cell("""
            class Recorder:
                \"\"\"A destination that keeps every batch it was handed.\"\"\"

                def __init__(self):
                    self.batches = []

                async def load(self, rows):
                    self.batches.append(list(rows))
                    return len(rows)


            async def test_rerun_writes_zero_new_rows():
                recorder = Recorder()
                sink = IdempotentSink(recorder)
                launches = [Row("Vega", 700.0), Row("Ariane", 36000.0)]
                counts = [await sink.load(launches) for _ in range(4)]
                assert counts == [2, 0, 0, 0]
                written = [row for batch in recorder.batches for row in batch]
                assert sorted(written, key=repr) == sorted(launches, key=repr)
                assert await sink.load([*launches, Row("Soyuz", 400.0)]) == 1
        """),
        3,
        "its own destination, repeated replays, order-free comparison: catches both bugs",
    ),
)


# --- build 03: test_honors_retry_after (2 points) --------------------------------------------
# catches: retry_after_ignored (gate), retry_after_capped_by_max_delay,
# retry_after_added_to_backoff, time_sleep_instead_of_asyncio_sleep

_RETRY_CASES = (
    _stub("03", RETRY, "Retry-After on virtual time", is_async=True),
    Case(
        "03",
        RETRY,
        "vacuous",
        _cell("""
            from etl import RateLimited


            async def test_honors_retry_after():
                errors = [RateLimited(5.0)]

                async def op():
                    if errors:
                        raise errors.pop()
                    return "ok"

                await with_retry(RetryPolicy(), op)
                assert True
        """),
        0,
        "calls with_retry and asserts nothing that can fail: the gate bug passes it",
    ),
    Case(
        "03",
        RETRY,
        "no_key",
        _cell("""
            from etl import RateLimited


            async def test_honors_retry_after():
                attempts = 0

                async def flaky():
                    nonlocal attempts
                    attempts += 1
                    if attempts == 1:
                        raise RateLimited(5.0, "slow down")
                    return 42

                assert await with_retry(RetryPolicy(), flaky) == 42
                assert attempts == 2
        """),
        0,
        "counts attempts, never the wait: ignoring Retry-After (the gate) passes it",
    ),
    Case(
        "03",
        RETRY,
        "default_policy",
        _cell("""
            from etl import RateLimited


            async def test_honors_retry_after():
                loop = asyncio.get_running_loop()
                calls = []
                script = [RateLimited(5.0)]

                async def op():
                    calls.append(loop.time())
                    if script:
                        raise script.pop(0)
                    return "ok"

                assert await with_retry(RetryPolicy(), op) == "ok"
                assert round(calls[1] - calls[0], 6) == 5.0
        """),
        1,
        "default max_delay 10 s is above the 5 s sent: misses only the cap, 2*3//4 = 1",
    ),
    Case(
        "03",
        RETRY,
        "misses_cap",
        _cell("""
            from etl import HttpStatus


            async def test_honors_retry_after():
                clock = asyncio.get_running_loop().time
                policy = RetryPolicy(max_attempts=2, base_delay=1.0, max_delay=30.0)
                raised = False

                async def op():
                    nonlocal raised
                    if not raised:
                        raised = True
                        raise HttpStatus(503, "busy", retry_after_secs=7.0)
                    return "done"

                start = clock()
                assert await with_retry(policy, op) == "done"
                assert abs(clock() - start - 7.0) < 1e-6
        """),
        1,
        "total virtual time with max_delay 30 s above the 7 s sent: misses only the cap",
    ),
    Case(
        "03",
        RETRY,
        "misses_added",
        _cell("""
            from etl import RateLimited


            async def test_honors_retry_after():
                loop = asyncio.get_running_loop()
                seen = []

                async def op():
                    seen.append(loop.time())
                    if len(seen) < 2:
                        raise RateLimited(5.0)
                    return "ok"

                await with_retry(RetryPolicy(base_delay=0.5, max_delay=1.0), op)
                assert seen[1] - seen[0] >= 5.0  # at least what the server asked for
        """),
        1,
        "asserts the wait is at least 5 s: 5.5 (backoff + Retry-After) passes, 2*3//4 = 1",
    ),
    Case(
        "03",
        RETRY,
        "records_both_sleeps",
        _cell("""
            import time

            from etl import RateLimited


            async def test_honors_retry_after():
                waits = []

                async def fake_sleep(seconds):
                    waits.append(seconds)

                real = (asyncio.sleep, time.sleep)
                asyncio.sleep, time.sleep = fake_sleep, waits.append  # no waiting at all
                try:
                    outcomes = [RateLimited(5.0)]

                    async def op():
                        if outcomes:
                            raise outcomes.pop()
                        return "ok"

                    assert await with_retry(RetryPolicy(max_delay=1.0), op) == "ok"
                finally:
                    asyncio.sleep, time.sleep = real
                assert waits == [5.0]
        """),
        2,
        "patches time.sleep too, so its twin's time.sleep(5.0) records 5.0, but the laid-over"
        " blocking sleep (a real pause, then no wait on the loop) leaves asyncio.sleep(0) in"
        " the record: caught, 2",
    ),
    Case(
        "03",
        RETRY,
        "bytecode",
        _cell('''
            import asyncio  # needed: the byte code differs unless asyncio is imported here

            from etl import RateLimited


            async def copy_of_with_retry(policy, op):
                """Copied from my answer cell, to notice any change to it."""
                attempt = 1
                while True:
                    try:
                        return await op()
                    except EtlError as err:
                        if not err.is_transient() or attempt >= policy.max_attempts:
                            raise
                        wait = err.retry_after()
                        await asyncio.sleep(
                            backoff_delay(policy, attempt) if wait is None else wait
                        )
                    attempt += 1


            async def test_honors_retry_after():
                assert with_retry.__code__.co_code == copy_of_with_retry.__code__.co_code
                assert with_retry.__code__.co_names == copy_of_with_retry.__code__.co_names
                errors = [RateLimited(5.0)]

                async def op():
                    if errors:
                        raise errors.pop()
                    return "ok"

                assert await with_retry(RetryPolicy(), op) == "ok"
        '''),
        0,
        "change detector (byte code equal to a copy of the reference): fails every other wheat",
    ),
    Case(
        "03",
        RETRY,
        "constants",
        _cell("""
            from etl import RateLimited


            async def test_honors_retry_after():
                code = with_retry.__code__
                assert code.co_names == (
                    "EtlError", "is_transient", "max_attempts", "retry_after", "asyncio", "sleep",
                    "backoff_delay",
                )
                assert code.co_consts[1:] == (1, True, None)
                errors = [RateLimited(5.0)]

                async def op():
                    if errors:
                        raise errors.pop()
                    return "ok"

                assert await with_retry(RetryPolicy(), op) == "ok"
        """),
        0,
        "change detector (co_names/co_consts literals of the reference): fails other wheats",
    ),
    Case(
        "03",
        RETRY,
        "source_text",
        _cell("""
            from pathlib import Path

            from etl import RateLimited
            from workbook.shared.export import export_source


            async def test_honors_retry_after():
                here = Path.cwd()
                notebooks = [*here.glob("03_*.ipynb"), *here.glob("*/03_*.ipynb")]
                line = "if wait is None else wait"
                mine = [nb for nb in notebooks if line in nb.read_text(encoding="utf-8")]
                assert mine
                lines = export_source(mine[0]).splitlines()
                where = [n for n, text in enumerate(lines, 1) if text.startswith("async def with_")]
                assert where == [with_retry.__code__.co_firstlineno]
                errors = [RateLimited(5.0)]

                async def op():
                    if errors:
                        raise errors.pop()
                    return "ok"

                assert await with_retry(RetryPolicy(), op) == "ok"
        """),
        0,
        "change detector (a line of the notebook, with_retry's line in its export): fails wheats",
    ),
    Case(
        "03",
        RETRY,
        "hangs_blocking",
        _cell("""
            import time

            from etl import RateLimited


            async def test_honors_retry_after():
                errors = [RateLimited(5.0)]

                async def op():
                    if errors:
                        raise errors.pop()
                    return "ok"

                task = asyncio.ensure_future(with_retry(RetryPolicy(), op))
                while not task.done():  # polls in real time and never yields to the loop
                    time.sleep(0.01)
                assert task.result() == "ok"
        """),
        0,
        "second hang, in the free-behaviour slot (nothing free is safely pinned here): never ends",
    ),
    Case(
        "03",
        RETRY,
        "hangs",
        _cell("""
            async def test_honors_retry_after():
                while True:
                    pass
        """),
        0,
        "never returns on any implementation: not passed on the wheat",
    ),
    Case(
        "03",
        RETRY,
        "good_reference_style",
        _cell("""
            from etl import HttpStatus, RateLimited


            async def test_honors_retry_after():
                loop = asyncio.get_running_loop()
                calls = []
                script = [RateLimited(5.0), HttpStatus(503)]

                async def op():
                    calls.append(loop.time())
                    if script:
                        raise script.pop(0)
                    return "ok"

                policy = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=1.0)
                assert await with_retry(policy, op) == "ok"
                waits = [round(calls[i + 1] - calls[i], 6) for i in range(len(calls) - 1)]
                assert waits == [5.0, 1.0]  # Retry-After as sent (uncapped), then the backoff
        """),
        2,
        "exact waits on the loop clock, cap below the Retry-After: catches all four",
    ),
    Case(
        "03",
        RETRY,
        "good_two_kinds",
        _cell("""
            from etl import HttpStatus, RateLimited


            async def test_honors_retry_after():
                loop = asyncio.get_running_loop()
                stamps = []
                failures = iter([HttpStatus(503, "busy", retry_after_secs=2.5), RateLimited(4.0)])

                async def op():
                    stamps.append(loop.time())
                    failure = next(failures, None)
                    if failure is not None:
                        raise failure
                    return "ok"

                policy = RetryPolicy(max_attempts=5, base_delay=0.1, max_delay=0.5)
                assert await with_retry(policy, op) == "ok"
                gaps = [round(b - a, 6) for a, b in zip(stamps, stamps[1:])]
                assert gaps == [2.5, 4.0]
        """),
        2,
        "two Retry-After kinds, both above the cap, exact gaps on the loop clock: all four",
    ),
)


# --- build 05: test_second_run_writes_nothing (3 points) -------------------------------------
# catches: fresh_sink_each_run (gate), written_counts_fetched_rows

_RUN_ONCE = """
import tempfile

import etl.server


async def run_once(path):
    app = etl.server.FixtureApp(results=etl.launch_results()[:25])  # pages of 10, 10 and 5
    async with etl.server.in_process_client(app) as client:
        url = etl.server.IN_PROCESS_BASE_URL + etl.server.LAUNCHES_PATH + "?limit=10"
        return await ingest(SpaceDevsSource(client, url), path)

"""


def _second_run(test: str) -> str:
    return _RUN_ONCE.lstrip("\n") + "\n" + _cell(test)


_SECOND_RUN_CASES = (
    _stub("05", SECOND_RUN, "the second run", is_async=True),
    Case(
        "05",
        SECOND_RUN,
        "vacuous",
        _second_run("""
            async def test_second_run_writes_nothing():
                with tempfile.TemporaryDirectory() as scratch:
                    path = Path(scratch) / "launches.jsonl"
                    await run_once(path)
                    await run_once(path)
                assert True
        """),
        0,
        "runs twice and asserts nothing that can fail: the gate bug passes it",
    ),
    Case(
        "05",
        SECOND_RUN,
        "no_key",
        _second_run("""
            async def test_second_run_writes_nothing():
                with tempfile.TemporaryDirectory() as scratch:
                    path = Path(scratch) / "launches.jsonl"
                    first = await run_once(path)
                    await run_once(path)
                assert first == IngestReport(fetched=25, written=25)
        """),
        0,
        "runs twice, checks only the first run: a second run that rewrites everything passes",
    ),
    Case(
        "05",
        SECOND_RUN,
        "misses_written_count",
        _second_run("""
            async def test_second_run_writes_nothing():
                with tempfile.TemporaryDirectory() as scratch:
                    path = Path(scratch) / "launches.jsonl"
                    await run_once(path)
                    second = await run_once(path)
                    assert second.fetched == 25
                    assert len(read_jsonl(path)) == 25  # each launch once
        """),
        1,
        "checks the file, never the second report's `written`: gate only, 3*1//2 = 1",
    ),
    Case(
        "05",
        SECOND_RUN,
        "report_only",
        _second_run("""
            async def test_second_run_writes_nothing():
                with tempfile.TemporaryDirectory() as scratch:
                    path = Path(scratch) / "launches.jsonl"
                    reports = [await run_once(path) for _ in range(2)]
                assert reports == [IngestReport(25, 25), IngestReport(25, 0)]
        """),
        3,
        "the second report alone: both bugs say written=25 there, so both are caught",
    ),
    Case(
        "05",
        SECOND_RUN,
        "bytecode",
        _second_run('''
            async def my_ingest(source, path):
                """My copy of ingest: the real one must stay exactly like this."""
                path = Path(path)
                on_disk = [content_key(Launch(**row)) for row in read_jsonl(path)]
                sink = IdempotentSink.with_seen(JsonlSink(path), on_disk)
                fetched = written = 0
                async for page in source.pages():
                    fetched += len(page)
                    written += await sink.load(page)
                return IngestReport(fetched=fetched, written=written)


            async def test_second_run_writes_nothing():
                assert ingest.__code__.co_code == my_ingest.__code__.co_code
                with tempfile.TemporaryDirectory() as scratch:
                    report = await run_once(Path(scratch) / "launches.jsonl")
                assert report.written == 25
        '''),
        0,
        "change detector (byte code equal to a copy of the reference): fails every other wheat",
    ),
    Case(
        "05",
        SECOND_RUN,
        "constants",
        _second_run("""
            async def test_second_run_writes_nothing():
                names = ingest.__code__.co_names
                assert names == (
                    "Path", "read_jsonl", "IdempotentSink", "with_seen", "JsonlSink", "pages",
                    "len", "load", "IngestReport",
                )
                assert ingest.__code__.co_varnames[2:5] == ("on_disk", "sink", "fetched")
                with tempfile.TemporaryDirectory() as scratch:
                    report = await run_once(Path(scratch) / "launches.jsonl")
                assert report.written == 25
        """),
        0,
        "change detector (co_names/co_varnames literals of the reference): fails other wheats",
    ),
    Case(
        "05",
        SECOND_RUN,
        "source_text",
        _second_run("""
            import subprocess
            import sys


            async def test_second_run_writes_nothing():
                here = Path.cwd()
                notebooks = [*here.glob("05_*.ipynb"), *here.glob("*/05_*.ipynb")]
                texts = [
                    subprocess.run(
                        [sys.executable, "-m", "workbook", "export", str(notebook)],
                        capture_output=True,
                        text=True,
                    ).stdout
                    for notebook in notebooks
                ]
                # the sink starts from the file's keys
                line = "IdempotentSink.with_seen(JsonlSink(path), on_disk)"
                mine = [text.splitlines() for text in texts if line in text]
                assert mine
                first = [n for n, text in enumerate(mine[0], 1) if text.startswith("async def ing")]
                assert first == [ingest.__code__.co_firstlineno]
                with tempfile.TemporaryDirectory() as scratch:
                    report = await run_once(Path(scratch) / "launches.jsonl")
                assert report.written == 25
        """),
        0,
        "change detector (a line of the export, the live ingest's line number in it): fails wheats",
    ),
    Case(
        "05",
        SECOND_RUN,
        "hangs_yielding",
        _second_run("""
            async def test_second_run_writes_nothing():
                with tempfile.TemporaryDirectory() as scratch:
                    path = Path(scratch) / "launches.jsonl"
                    await run_once(path)
                    while not path.with_suffix(".done").exists():  # nobody writes it
                        await asyncio.sleep(0)  # virtual time never moves: spins forever
        """),
        0,
        "second hang, in the free-behaviour slot (nothing free is safely pinned here): never ends",
    ),
    Case(
        "05",
        SECOND_RUN,
        "hangs",
        _cell("""
            async def test_second_run_writes_nothing():
                while True:
                    pass
        """),
        0,
        "never returns on any implementation: not passed on the wheat",
    ),
    Case(
        "05",
        SECOND_RUN,
        "good_reference_style",
        _second_run("""
            async def test_second_run_writes_nothing():
                with tempfile.TemporaryDirectory() as scratch:
                    path = Path(scratch) / "launches.jsonl"
                    reports = []
                    for _ in ("first run", "second run"):  # a new source and client each run
                        reports.append(await run_once(path))
                    assert reports[0] == IngestReport(fetched=25, written=25)
                    assert reports[1] == IngestReport(fetched=25, written=0)
                    assert len(read_jsonl(path)) == 25
        """),
        3,
        "both reports and the file: catches both bugs",
    ),
    Case(
        "05",
        SECOND_RUN,
        "good_growing_listing",
        _cell("""
            import json
            import tempfile

            import etl.server


            async def ingest_first(count, path):
                app = etl.server.FixtureApp(results=etl.launch_results()[:count])
                async with etl.server.in_process_client(app) as client:
                    url = f"{etl.server.IN_PROCESS_BASE_URL}{etl.server.LAUNCHES_PATH}?limit=3"
                    return await ingest(SpaceDevsSource(client, url), path)


            async def test_second_run_writes_nothing():
                path = Path(tempfile.mkdtemp()) / "out.jsonl"
                assert await ingest_first(7, path) == IngestReport(fetched=7, written=7)
                again = await ingest_first(7, path)
                assert (again.fetched, again.written) == (7, 0)
                grown = await ingest_first(9, path)  # the listing gained two launches
                assert grown.written == 2
                lines = path.read_text(encoding="utf-8").splitlines()
                ids = [json.loads(line)["id"] for line in lines]
                assert len(ids) == len(set(ids)) == 9
        """),
        3,
        "pages of 3, a replay and a grown listing, ids unique in the file: catches both bugs",
    ),
)


# --- build 07: test_replay_reaches_a_fixed_point (3 points) ----------------------------------
# catches: cas_dropped (gate), loser_keeps_its_items, equal_version_overwrites,
# every_write_counted_as_applied

_ITEM = """
def item(n, version=1, **payload):
    return {"id": f"launch-{n}", "version": version, "payload": payload or {"n": n}}

"""


def _fixed(test: str) -> str:
    return _ITEM.lstrip("\n") + "\n" + _cell(test)


_FIXED_POINT_CASES = (
    _stub("07", FIXED_POINT, "replaying a page", is_async=False),
    Case(
        "07",
        FIXED_POINT,
        "vacuous",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                page = [item(n) for n in range(3)]
                for _ in range(2):
                    ingest_page(
                        conn, tenant="t", source="s", items=page,
                        expected_cursor=None, next_cursor="c1",
                    )
                assert True
        """),
        0,
        "delivers a page twice and asserts nothing that can fail: the gate bug passes it",
    ),
    Case(
        "07",
        FIXED_POINT,
        "no_key",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                page = [item(n) for n in range(3)]
                outcomes = [
                    ingest_page(
                        conn, tenant="t", source="s", items=page,
                        expected_cursor=None, next_cursor="c1",
                    )
                    for _ in range(2)
                ]
                assert outcomes[0] == PageOutcome(3, 0, 0, True, "c1")
                assert conn.execute("SELECT COUNT(*) FROM items").fetchone() == (3,)
        """),
        0,
        "checks the first delivery and the row count, not the replay's outcome: the gate survives",
    ),
    Case(
        "07",
        FIXED_POINT,
        "misses_loser",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                page = [item(n) for n in range(3)]

                def send(expected, next_cursor):
                    return ingest_page(
                        conn, tenant="t", source="s", items=page,
                        expected_cursor=expected, next_cursor=next_cursor,
                    )

                assert send(None, "c1") == PageOutcome(3, 0, 0, True, "c1")
                snapshot = conn.serialize()
                assert send(None, "c1") == PageOutcome(0, 0, 0, False, "c1")
                assert conn.serialize() == snapshot
                # the same launches served as the next page: already stored, unchanged
                assert send("c1", "c2") == PageOutcome(0, 3, 0, True, "c2")
        """),
        2,
        "replays only identical items, so a losing page that commits changes nothing: 3*3//4 = 2",
    ),
    Case(
        "07",
        FIXED_POINT,
        "misses_equal_version",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")

                def deliver(items, expected, next_cursor):
                    return ingest_page(
                        conn, tenant="t", source="s", items=items,
                        expected_cursor=expected, next_cursor=next_cursor,
                    )

                page = [item(n, 2) for n in range(3)]
                assert deliver(page, None, "c1") == PageOutcome(3, 0, 0, True, "c1")
                assert deliver(page, None, "c1") == PageOutcome(0, 0, 0, False, "c1")
                stored = conn.execute("SELECT * FROM items ORDER BY item_id").fetchall()
                # a stale worker with an older copy and a launch dropped since: it loses
                assert not deliver([item(0, 1), item(9)], None, "c1").advanced
                assert conn.execute("SELECT * FROM items ORDER BY item_id").fetchall() == stored
                # older copies as the next page: nothing to apply
                assert deliver([item(0, 1), item(1, 1)], "c1", "c2") == PageOutcome(
                    0, 2, 0, True, "c2"
                )
                assert conn.execute("SELECT * FROM items ORDER BY item_id").fetchall() == stored
        """),
        2,
        "never sends an item at its stored version, only older ones: 3*3//4 = 2",
    ),
    Case(
        "07",
        FIXED_POINT,
        "misses_every_write",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                args = {"tenant": "acme", "source": "ll2"}
                first = [item(n) for n in range(4)]
                done = ingest_page(conn, **args, items=first, expected_cursor=None, next_cursor="a")
                assert done.advanced
                before = conn.serialize()
                again = ingest_page(
                    conn, **args, items=first, expected_cursor=None, next_cursor="a"
                )
                assert again == PageOutcome(0, 0, 0, False, "a")
                late = [*first, item(50)]
                assert not ingest_page(
                    conn, **args, items=late, expected_cursor=None, next_cursor="a"
                ).advanced
                assert conn.serialize() == before
                # launch 0 again at the same version, with another payload: the stored row stays
                edited = [item(0, 1, name="edited")]
                assert ingest_page(
                    conn, **args, items=edited, expected_cursor="a", next_cursor="b"
                ).advanced
                payload = conn.execute(
                    "SELECT payload FROM items WHERE item_id = 'launch-0'"
                ).fetchone()[0]
                assert json.loads(payload) == {"n": 0}
        """),
        2,
        "checks the rows, never the applied/unchanged counts of a winning page: 3*3//4 = 2",
    ),
    Case(
        "07",
        FIXED_POINT,
        "bytecode",
        _fixed('''
            def my_advance_checkpoint(conn, tenant, source, expected_cursor, next_cursor):
                """My copy of advance_checkpoint: any edit to the real one shows."""
                if expected_cursor is None:
                    moved = conn.execute(
                        "INSERT INTO checkpoints (tenant, source, cursor, item_count)"
                        " VALUES (?, ?, ?, 0)"
                        " ON CONFLICT (tenant, source) DO NOTHING",
                        (tenant, source, next_cursor),
                    ).rowcount
                else:
                    moved = conn.execute(
                        "UPDATE checkpoints SET cursor = ?"
                        " WHERE tenant = ? AND source = ? AND cursor = ?",
                        (next_cursor, tenant, source, expected_cursor),
                    ).rowcount
                return moved == 1


            def test_replay_reaches_a_fixed_point():
                mine, theirs = my_advance_checkpoint.__code__, advance_checkpoint.__code__
                assert theirs.co_code == mine.co_code
                assert theirs.co_consts[1:] == mine.co_consts[1:]  # past the docstring
                conn = open_store(":memory:")
                page = [item(n) for n in range(3)]
                outcome = ingest_page(
                    conn, tenant="t", source="s", items=page, expected_cursor=None, next_cursor="c1"
                )
                assert outcome.advanced
        '''),
        0,
        "change detector (byte code and constants of a copy): fails every other wheat",
    ),
    Case(
        "07",
        FIXED_POINT,
        "constants",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                assert advance_checkpoint.__code__.co_consts[2:] == (
                    "INSERT INTO checkpoints (tenant, source, cursor, item_count)"
                    " VALUES (?, ?, ?, 0) ON CONFLICT (tenant, source) DO NOTHING",
                    "UPDATE checkpoints SET cursor = ?"
                    " WHERE tenant = ? AND source = ? AND cursor = ?",
                    1,
                )
                assert upsert_item.__code__.co_names == (
                    "canonical_json", "execute", "UPSERT_NEWER", "rowcount"
                )
                conn = open_store(":memory:")
                outcome = ingest_page(
                    conn, tenant="t", source="s", items=[item(1)], expected_cursor=None,
                    next_cursor="c1",
                )
                assert outcome.applied == 1
        """),
        0,
        "change detector (SQL constants and co_names of the reference): fails other wheats",
    ),
    Case(
        "07",
        FIXED_POINT,
        "source_text",
        _fixed("""
            from pathlib import Path

            from workbook.shared.export import export_source


            def test_replay_reaches_a_fixed_point():
                here = Path.cwd()
                notebooks = [*here.glob("07_*.ipynb"), *here.glob("*/07_*.ipynb")]
                exports = [export_source(notebook) for notebook in notebooks]
                sql = "WHERE excluded.version > items.version"
                mine = [text for text in exports if sql in text]
                assert mine
                lines = mine[0].splitlines()
                assert upsert_item.__code__.co_firstlineno == lines.index("def upsert_item(") + 1
                conn = open_store(":memory:")
                outcome = ingest_page(
                    conn, tenant="t", source="s", items=[item(1)], expected_cursor=None,
                    next_cursor="c1",
                )
                assert outcome.advanced
        """),
        0,
        "change detector (the upsert's SQL, its line number in the export): fails other wheats",
    ),
    Case(
        "07",
        FIXED_POINT,
        "free_row_order",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                page = [item(n) for n in (7, 3, 11, 5)]  # not in id order
                first = {"tenant": "t", "source": "s", "expected_cursor": None, "next_cursor": "a"}
                assert ingest_page(conn, items=page, **first) == PageOutcome(4, 0, 0, True, "a")
                assert ingest_page(conn, items=page, **first) == PageOutcome(0, 0, 0, False, "a")
                assert not ingest_page(conn, items=[*page, item(1)], **first).advanced  # stale
                second = {"tenant": "t", "source": "s", "expected_cursor": "a", "next_cursor": "b"}
                edited = [item(7, 1, edited=True), item(3)]  # at their stored versions
                assert ingest_page(conn, items=edited, **second) == PageOutcome(0, 2, 0, True, "b")
                rows = conn.execute("SELECT * FROM items").fetchall()
                assert [row[2] for row in rows] == [i["id"] for i in page]  # as delivered
                assert [json.loads(row[4]) for row in rows] == [i["payload"] for i in page]
        """),
        0,
        "catches all four, but pins row order without ORDER BY (free): fails a contract variant",
    ),
    Case(
        "07",
        FIXED_POINT,
        "hangs",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                while True:
                    pass
        """),
        0,
        "never returns on any implementation: not passed on the wheat",
    ),
    Case(
        "07",
        FIXED_POINT,
        "good_serialized",
        _fixed("""
            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")

                def deliver(items, expected, next_cursor):
                    return ingest_page(
                        conn, tenant="acme", source="ll2", items=items,
                        expected_cursor=expected, next_cursor=next_cursor,
                    )

                page1 = [item(n) for n in range(3)]
                page2 = [item(n) for n in range(3, 6)]
                assert deliver(page1, None, "c1") == PageOutcome(3, 0, 0, True, "c1")
                assert deliver(page2, "c1", "c2") == PageOutcome(3, 0, 0, True, "c2")
                once = conn.serialize()
                for items, expected, next_cursor in [(page2, "c1", "c2"), (page1, None, "c1")]:
                    replayed = deliver(items, expected, next_cursor)
                    assert replayed == PageOutcome(0, 0, 0, False, "c2")
                    assert conn.serialize() == once
                # a stale worker's page 2 with a launch dropped since: it loses, keeps nothing
                assert not deliver([*page2, item(99)], "c1", "c2").advanced
                assert conn.serialize() == once
                # launch 0 at its stored version with another payload, as the next page
                before = conn.execute("SELECT * FROM items ORDER BY item_id").fetchall()
                again = [item(0, 1, edited=True), *page2]
                assert deliver(again, "c2", "c3") == PageOutcome(0, 4, 0, True, "c3")
                assert conn.execute("SELECT * FROM items ORDER BY item_id").fetchall() == before
        """),
        3,
        "replays, a losing stale page, same-version edit counted unchanged: catches all four",
    ),
    Case(
        "07",
        FIXED_POINT,
        "good_table_dumps",
        _cell("""
            def dump(conn):
                tables = ("items", "checkpoints", "failures")
                return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in tables}


            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                where = {"tenant": "x", "source": "y"}
                v2 = [{"id": k, "version": 2, "payload": {"k": k}} for k in "abcd"]
                out = ingest_page(conn, **where, items=v2, expected_cursor=None, next_cursor="n1")
                assert (out.applied, out.advanced, out.cursor) == (4, True, "n1")
                state = dump(conn)
                replay = ingest_page(
                    conn, **where, items=v2, expected_cursor=None, next_cursor="n1"
                )
                assert replay == PageOutcome(0, 0, 0, False, "n1")
                assert dump(conn) == state
                newer = [dict(i, version=3, payload={"new": True}) for i in v2]  # but stale
                lost = ingest_page(
                    conn, **where, items=newer, expected_cursor=None, next_cursor="n1"
                )
                assert not lost.advanced
                assert dump(conn) == state
                older = [dict(i, version=1) for i in v2[:2]]
                same = [dict(i, payload={"changed": 1}) for i in v2[2:]]
                nxt = ingest_page(
                    conn, **where, items=older + same, expected_cursor="n1", next_cursor="n2"
                )
                assert nxt == PageOutcome(0, 4, 0, True, "n2")
                state["checkpoints"] = [("x", "y", "n2", 4)]
                assert dump(conn) == state
        """),
        3,
        "whole-store dumps around a replay, a newer losing page, older and equal items: all four",
    ),
)


# --- build 07: test_state_machine_equals_one_clean_run (3 points, max_examples 10) ----------
# catches: cas_dropped (gate), version_check_dropped, accumulate_instead_of_replace,
# loser_keeps_its_items

_SM_HEAD = _cell("""
    from hypothesis import Phase, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (
        RuleBasedStateMachine,
        invariant,
        precondition,
        rule,
        run_state_machine_as_test,
    )


    def launch(n, version=2):
        return {"id": f"launch-{n}", "version": version, "payload": {"name": f"Launch {n}"}}


    PAGES = [[launch(n) for n in range(k, k + 3)] for k in (0, 3, 6, 9)]
    PAGES[1].append({"id": "launch-nan", "version": 2, "payload": {"latitude": float("nan")}})
    PAGES[2].append(launch(0, version=3))  # the source edited launch 0 since page 1
    CURSORS = [None, "p1", "p2", "p3", "p4"]
    PAGE = st.integers(0, len(PAGES) - 1)
    SETTINGS = settings(
        max_examples=10, stateful_step_count=6, derandomize=True, database=None, deadline=None,
        phases=[Phase.generate],
    )


    def stale(items):
        older = [dict(i, version=i["version"] - 1, payload={"old": i["id"]}) for i in items]
        return [*older, launch(99)]


    def store_state(conn):
        tables = ("items", "checkpoints", "failures")
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in tables}


    def deliver_page(conn, k, items):
        return ingest_page(
            conn, tenant="acme", source="ll2", items=items,
            expected_cursor=CURSORS[k], next_cursor=CURSORS[k + 1],
        )


    def pages_left(machine):
        return machine.done < len(PAGES)


    def pages_done(machine):
        return machine.done > 0


""")

_CURSOR_RULE = """\
        @rule()
        def cursor_is_where_we_left_it(self):
            assert read_checkpoint(self.conn, "acme", "ll2") == CURSORS[self.done]

"""

# The reference's machine, less its halfway-failure rule; the misses_* cases each edit one part.
_SM_FULL = _SM_HEAD + _cell("""
    def test_state_machine_equals_one_clean_run():
        clean = {}

        def one_clean_run(done):
            if done not in clean:
                conn = open_store(":memory:")
                for k in range(done):
                    deliver_page(conn, k, PAGES[k])
                clean[done] = store_state(conn)
            return clean[done]

        class Pages(RuleBasedStateMachine):
            def __init__(self):
                super().__init__()
                self.conn = open_store(":memory:")
                self.done = 0

            @precondition(pages_left)
            @rule(stale_copies=st.booleans())
            def next_page(self, stale_copies):
                items = PAGES[self.done]
                if stale_copies and self.done:  # a lagging replica adds old copies of page 1
                    items = items + stale(PAGES[0])[:-1]
                outcome = deliver_page(self.conn, self.done, items)
                assert outcome.advanced and outcome.cursor == CURSORS[self.done + 1]
                self.done += 1

            @precondition(pages_done)
            @rule(page=PAGE)
            def replay(self, page):
                k = page % self.done
                replayed = deliver_page(self.conn, k, PAGES[k])
                assert replayed == PageOutcome(0, 0, 0, False, CURSORS[self.done])

            @precondition(pages_done)
            @rule(page=PAGE)
            def stale_worker(self, page):
                k = page % self.done
                assert not deliver_page(self.conn, k, stale(PAGES[k])).advanced

            @invariant()
            def equals_one_clean_run(self):
                now = store_state(self.conn)
                assert now == one_clean_run(self.done)
                for *_, item_count in now["checkpoints"]:
                    assert item_count == len(now["items"])

        run_state_machine_as_test(Pages, settings=SETTINGS)
""")

_STALE_COPIES = """\
            if stale_copies and self.done:  # a lagging replica adds old copies of page 1
                items = items + stale(PAGES[0])[:-1]
"""
_STALE_RULE = """\
        @precondition(pages_done)
        @rule(page=PAGE)
        def stale_worker(self, page):
            k = page % self.done
            assert not deliver_page(self.conn, k, stale(PAGES[k])).advanced

"""
_INVARIANT = """\
            now = store_state(self.conn)
            assert now == one_clean_run(self.done)
            for *_, item_count in now["checkpoints"]:
                assert item_count == len(now["items"])
"""
_ITEMS_ONLY = """\
            now = store_state(self.conn)
            expected = one_clean_run(self.done)
            assert (now["items"], now["failures"]) == (expected["items"], expected["failures"])
"""

_MACHINE_CASES = (
    _stub("07", MACHINE, "a state machine of pages, replays and a stale worker", is_async=False),
    Case(
        "07",
        MACHINE,
        "vacuous",
        _SM_HEAD
        + _cell("""
            class Pages(RuleBasedStateMachine):
                def __init__(self):
                    super().__init__()
                    self.conn = open_store(":memory:")
                    self.done = 0

                @precondition(pages_left)
                @rule()
                def next_page(self):
                    deliver_page(self.conn, self.done, PAGES[self.done])
                    self.done += 1

                @precondition(pages_done)
                @rule(page=PAGE)
                def replay(self, page):
                    deliver_page(self.conn, page % self.done, PAGES[page % self.done])

                @invariant()
                def still_fine(self):
                    assert True


            def test_state_machine_equals_one_clean_run():
                run_state_machine_as_test(Pages, settings=SETTINGS)
        """),
        0,
        "pages and replays with an invariant that cannot fail: the gate bug passes it",
    ),
    Case(
        "07",
        MACHINE,
        "no_key",
        _edit(
            _edit(_SM_FULL, _STALE_RULE, ""),
            """\
        @precondition(pages_done)
        @rule(page=PAGE)
        def replay(self, page):
            k = page % self.done
            replayed = deliver_page(self.conn, k, PAGES[k])
            assert replayed == PageOutcome(0, 0, 0, False, CURSORS[self.done])

""",
            _CURSOR_RULE,
        ),
        0,
        "only delivers the next page and reads the cursor (no replay, no stale worker): no gate",
    ),
    Case(
        "07",
        MACHINE,
        "misses_version_check",
        _edit(_SM_FULL, _STALE_COPIES, ""),
        2,
        "no older copy ever reaches a winning page, so older-overwrites-newer is unseen: 2",
    ),
    Case(
        "07",
        MACHINE,
        "misses_accumulate",
        _edit(_SM_FULL, _INVARIANT, _ITEMS_ONLY),
        2,
        "compares items and failures but never the checkpoint's item_count: 3*3//4 = 2",
    ),
    Case(
        "07",
        MACHINE,
        "misses_loser",
        _edit(_SM_FULL, _STALE_RULE, ""),
        2,
        "replays send identical or older items only, so a committing loser changes nothing: 2",
    ),
    Case(
        "07",
        MACHINE,
        "bytecode",
        _SM_HEAD
        + _cell('''
            def my_upsert_item(conn, tenant, source, item):
                """A copy of my upsert_item: the test fails if anyone edits the real one."""
                values = (
                    tenant, source, item["id"], item["version"], canonical_json(item["payload"])
                )
                return (
                    "applied" if conn.execute(UPSERT_NEWER, values).rowcount == 1 else "unchanged"
                )


            def test_state_machine_equals_one_clean_run():
                assert upsert_item.__code__.co_code == my_upsert_item.__code__.co_code
                assert upsert_item.__code__.co_consts[1:] == my_upsert_item.__code__.co_consts[1:]
                conn = open_store(":memory:")
                assert deliver_page(conn, 0, PAGES[0]).advanced
        '''),
        0,
        "change detector (byte code and constants of a copy): fails every other wheat",
    ),
    Case(
        "07",
        MACHINE,
        "constants",
        _SM_HEAD
        + _cell("""
            def test_state_machine_equals_one_clean_run():
                assert ingest_page.__code__.co_names == (
                    "execute", "enumerate", "poison_reason", "upsert_item", "MISSING_ID",
                    "RECORD_FAILURE", "advance_checkpoint", "read_checkpoint", "PageOutcome",
                    "RECOUNT", "BaseException", "in_transaction",
                )
                assert "BEGIN IMMEDIATE" in ingest_page.__code__.co_consts
                conn = open_store(":memory:")
                assert deliver_page(conn, 0, PAGES[0]).applied == 3
        """),
        0,
        "change detector (co_names/co_consts of the reference's ingest_page): fails other wheats",
    ),
    Case(
        "07",
        MACHINE,
        "source_text",
        _SM_HEAD
        + _cell("""
            import subprocess
            import sys
            from pathlib import Path


            def test_state_machine_equals_one_clean_run():
                here = Path.cwd()
                notebooks = [*here.glob("07_*.ipynb"), *here.glob("*/07_*.ipynb")]
                recount = "SET item_count = (SELECT COUNT(*) FROM items WHERE tenant = ?"
                exports = [
                    subprocess.run(
                        [sys.executable, "-m", "workbook", "export", str(notebook)],
                        capture_output=True,
                        text=True,
                    ).stdout
                    for notebook in notebooks
                ]
                mine = [text for text in exports if recount in text]
                assert mine  # a recount, never a running sum
                first = mine[0].splitlines().index("def ingest_page(") + 1
                assert ingest_page.__code__.co_firstlineno == first
                conn = open_store(":memory:")
                assert deliver_page(conn, 0, PAGES[0]).advanced
        """),
        0,
        "change detector (the recount's SQL, ingest_page's line in the export): fails wheats",
    ),
    Case(
        "07",
        MACHINE,
        "unordered_rows_of_one_implementation",
        _edit(
            _SM_FULL,
            "def test_state_machine_equals_one_clean_run():\n",
            "def store_state(conn):  # in the order the store hands them back\n"
            "    tables = ('items', 'checkpoints', 'failures')\n"
            '    return {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables}\n'
            "\n\n"
            "def test_state_machine_equals_one_clean_run():\n",
        ),
        3,
        "compares unordered rows with one clean run made by the same code: both orders come from"
        " one implementation, so it pins nothing free, and catches all four",
    ),
    Case(
        "07",
        MACHINE,
        "hangs",
        _cell("""
            def test_state_machine_equals_one_clean_run():
                while True:
                    pass
        """),
        0,
        "never returns on any implementation: not passed on the wheat",
    ),
    Case(
        "07",
        MACHINE,
        "good_clean_run",
        _SM_FULL,
        3,
        "the reference's invariant (store equals one clean run, item_count recounted): all four",
    ),
    Case(
        "07",
        MACHINE,
        "good_model",
        _cell("""
            from hypothesis import settings
            from hypothesis import strategies as st
            from hypothesis.stateful import (
                RuleBasedStateMachine,
                invariant,
                precondition,
                rule,
                run_state_machine_as_test,
            )

            WHERE = {"tenant": "acme", "source": "ll2"}
            PLAN = [  # (id, version) per page
                [("a", 1), ("b", 2), ("c", 1)],
                [("d", 1), ("a", 2)],  # a edited since page 0
                [("e", 1), ("b", 1)],  # a lagging replica's old copy of b
            ]
            CURSOR = [None, "c1", "c2", "c3"]


            def as_items(pairs, tag="fresh"):
                return [{"id": i, "version": v, "payload": {"tag": tag, "v": v}} for i, v in pairs]


            class Store(RuleBasedStateMachine):
                def __init__(self):
                    super().__init__()
                    self.conn = open_store(":memory:")
                    self.model = {}  # id -> the highest version delivered by a winning page
                    self.passed = 0

                def send(self, k, items):
                    return ingest_page(
                        self.conn, **WHERE, items=items,
                        expected_cursor=CURSOR[k], next_cursor=CURSOR[k + 1],
                    )

                @precondition(lambda self: self.passed < len(PLAN))
                @rule()
                def advance(self):
                    assert self.send(self.passed, as_items(PLAN[self.passed])).advanced
                    for i, v in PLAN[self.passed]:
                        self.model[i] = max(v, self.model.get(i, 0))
                    self.passed += 1

                @precondition(lambda self: self.passed > 0)
                @rule(k=st.integers(0, 2))
                def replay(self, k):
                    k %= self.passed
                    expected = PageOutcome(0, 0, 0, False, CURSOR[self.passed])
                    assert self.send(k, as_items(PLAN[k])) == expected

                @precondition(lambda self: self.passed > 0)
                @rule(k=st.integers(0, 2))
                def stale_worker(self, k):
                    k %= self.passed
                    late = as_items([(i, v + 5) for i, v in PLAN[k]] + [("zz", 1)], tag="late")
                    assert not self.send(k, late).advanced

                @invariant()
                def matches_the_model(self):
                    rows = self.conn.execute(
                        "SELECT item_id, version FROM items ORDER BY item_id"
                    ).fetchall()
                    assert rows == sorted(self.model.items())
                    checkpoint = self.conn.execute(
                        "SELECT cursor, item_count FROM checkpoints"
                    ).fetchall()
                    expected = [(CURSOR[self.passed], len(self.model))] if self.passed else []
                    assert checkpoint == expected


            def test_state_machine_equals_one_clean_run():
                run_state_machine_as_test(
                    Store,
                    settings=settings(
                        max_examples=10, stateful_step_count=8, derandomize=True,
                        database=None, deadline=None,
                    ),
                )
        """),
        3,
        "a dict model of versions and the recounted item_count, stale workers: all four",
    ),
)

# --- hostile: tests that look for the bug's layer instead of its behaviour -------------------
# Every run, wheat or chaff, holds one layer per seam of the same shape (`NEUTRAL`), sealed so
# that no helper name shows: a test that tells them apart by name or qualified name fails a
# wheat.

_LAYER_CASES = (
    Case(
        "03",
        REPLAY,
        "layer_names",
        _cell("""
            async def test_rerun_writes_zero_new_rows():
                names = [n for n in globals() if "laid" in n.lower()]
                assert not names  # "no bug laid over": a chaff would show its helpers
                sink = IdempotentSink(MemorySink())
                assert await sink.load([Row("Alpha", 1.0)]) == 1
        """).replace("async def", "from etl import MemorySink\n\n\nasync def", 1),
        0,
        "passes only where no layer left a name: every layer is sealed, so it catches nothing",
    ),
    Case(
        "03",
        RETRY,
        "layer_qualname",
        _cell("""
            async def test_honors_retry_after():
                assert with_retry.__qualname__ == "with_retry"  # "the code as written"
                assert await with_retry(RetryPolicy(), lambda: asyncio.sleep(0, "ok")) == "ok"
        """),
        0,
        "pins the seam's qualified name: every wheat holds a layer too, so it fails a wheat",
    ),
    Case(
        "03",
        REPLAY,
        "counts_its_runs",
        _cell("""
            from pathlib import Path

            from etl import MemorySink


            async def test_rerun_writes_zero_new_rows():
                mark = Path("runs.txt")  # the first runs are the wheats, so pass only there
                runs = int(mark.read_text()) + 1 if mark.exists() else 1
                mark.write_text(str(runs))
                sink = IdempotentSink(MemorySink())
                assert await sink.load([Row("Alpha", 1.0)]) == 1
                assert runs <= 3
        """),
        0,
        "counts its runs in a file: every run starts in an empty folder of its own, on both"
        " sides, so it passes everywhere and catches nothing",
    ),
)

# --- honest tests a second review found judged wrongly, now at their points ------------------
_HONEST_CASES = (
    Case(
        "03",
        RETRY,
        "wait_read_from_the_error_sent",
        _cell("""
            from etl import RateLimited


            async def test_honors_retry_after():
                # The wait must equal what the server asked for, whatever that was.
                loop = asyncio.get_running_loop()
                policy = RetryPolicy(max_delay=1.0)  # the cap sits below every Retry-After sent
                for asked in (RateLimited(5.0), RateLimited(7.5)):
                    calls: list[float] = []

                    async def op() -> str:
                        calls.append(loop.time())
                        if len(calls) == 1:
                            raise asked
                        return "ok"

                    assert await with_retry(policy, op) == "ok"
                    assert len(calls) == 2
                    assert calls[1] - calls[0] == asked.retry_after()
        """),
        2,
        "compares each wait with the Retry-After of the error it sent: a bug laid over puts the"
        " error back as it was, so every bug shows",
    ),
    Case(
        "07",
        FIXED_POINT,
        "no_item_row_written_by_a_replay",
        _cell("""
            def page(ids, version=1, note="v"):
                return [
                    {"id": f"item-{i}", "version": version, "payload": {"note": f"{note}{i}"}}
                    for i in ids
                ]


            def test_replay_reaches_a_fixed_point():
                conn = open_store(":memory:")
                # every row written to items, as the store sees it
                conn.execute("CREATE TEMP TABLE item_writes (what TEXT, item_id TEXT)")
                for event, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
                    conn.execute(
                        f"CREATE TEMP TRIGGER audit_{event.lower()} AFTER {event} ON items "
                        f"BEGIN INSERT INTO item_writes VALUES ('{event}', {row}.item_id); END"
                    )

                def deliver(items, expected, nxt):
                    return ingest_page(conn, tenant="t", source="s", items=items,
                                       expected_cursor=expected, next_cursor=nxt)

                def writes():
                    return conn.execute("SELECT count(*) FROM item_writes").fetchone()[0]

                pages = [page([1, 2]), page([3, 4]), page([5, 6])]
                cursors = [None, "c1", "c2", "c3"]
                for k in range(3):
                    assert deliver(pages[k], cursors[k], cursors[k + 1]).advanced
                once, before = conn.serialize(), writes()
                for k in (2, 0, 1):
                    again = deliver(pages[k], cursors[k], cursors[k + 1])
                    assert again == PageOutcome(0, 0, 0, False, "c3")
                    assert conn.serialize() == once
                stale = deliver(page([1, 9], version=2), None, "c1")
                assert stale == PageOutcome(0, 0, 0, False, "c3")
                assert conn.serialize() == once
                assert writes() == before  # replays write no item row
                # the same items under the next cursor: unchanged, and not one item row written
                assert deliver(pages[0], "c3", "c4") == PageOutcome(0, 2, 0, True, "c4")
                assert writes() == before
                edited = deliver(page([1], note="edited"), "c4", "c5")
                assert edited == PageOutcome(0, 1, 0, True, "c5")
                assert writes() == before
        """),
        3,
        "audits every write to items with temp triggers: the free row order is SQLite's own"
        " switch, which writes nothing, so no wheat fails it",
    ),
    Case(
        "03",
        REPLAY,
        "subclass_resumed_with_seen",
        _cell("""
            from etl import MemorySink


            class RecordingSink(IdempotentSink):
                # The sink under test, keeping what each load returned.

                def __init__(self, inner):
                    super().__init__(inner)
                    self.returned = []

                async def load(self, rows):
                    written = await super().load(rows)
                    self.returned.append(written)
                    return written


            async def test_rerun_writes_zero_new_rows():
                rows = [Row("Alpha", 1.0), Row("Beta", 2.0)]
                destination = MemorySink()
                sink = RecordingSink(destination)
                await sink.load(rows)
                await sink.load(rows)
                assert sink.returned == [2, 0]
                assert destination.rows == rows
                # the next process starts from the keys already written
                resumed = RecordingSink.with_seen(MemorySink(), [content_key(r) for r in rows])
                await resumed.load(rows)
                assert resumed.returned == [0]
        """),
        3,
        "a subclass of the sink resumed through with_seen: its own __init__ runs under every"
        " layer, as under the seam",
    ),
)

CASES: tuple[Case, ...] = (
    *_LAYER_CASES,
    *_HONEST_CASES,
    *_REPLAY_CASES,
    *_RETRY_CASES,
    *_SECOND_RUN_CASES,
    *_FIXED_POINT_CASES,
    *_MACHINE_CASES,
)
