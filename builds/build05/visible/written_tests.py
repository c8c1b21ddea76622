"""Build 05's test-writing step: the seam its learner test tests, and the bugs of its
``catches`` laid over that seam.

Each bug wraps ``ingest(source, path)`` through what crosses it (the file at `path`, the
report it returns), so it is the same bug over the learner's code (the self-check) and over
the reference (the grader); each has a twin of the same name in the hidden ``mutants.toml``.
The contract of `ingest` leaves nothing free that a test can see (the file's lines and the
report are pinned), so it has no contract variant. This module ships to learners: it holds no
statement of any answer.
"""

from __future__ import annotations

from workbook.checking.layover import LaidOver, over

#: Test-writing steps: the learner's test -> the seams it tests.
LEARNER_TESTS: dict[str, tuple[str, ...]] = {"test_second_run_writes_nothing": ("ingest",)}

LAID_OVER: dict[str, LaidOver] = {
    bug.name: bug
    for bug in (
        LaidOver(
            "fresh_sink_each_run",
            "the second run forgets what the file already holds and writes every launch again",
            # The file is hidden from the run and put back before what it wrote.
            "import pathlib as _laid_pathlib\n"
            + over(
                "ingest",
                "async def ingest(source, path):\n"
                "    target = _laid_pathlib.Path(path)\n"
                "    held = target.read_bytes() if target.is_file() else None\n"
                "    if held is not None:\n"
                "        target.unlink()\n"
                "    try:\n"
                "        return await under(source, path)\n"
                "    finally:\n"
                "        if held is not None:\n"
                "            new = target.read_bytes() if target.is_file() else b''\n"
                "            target.write_bytes(held + new)\n",
            ),
            "you ingest twice into one file and count the launches it holds",
        ),
        LaidOver(
            "written_counts_fetched_rows",
            "ingest reports every fetched row as written, so a second run says it wrote them all",
            over(
                "ingest",
                "async def ingest(source, path):\n"
                "    report = await under(source, path)\n"
                "    return type(report)(fetched=report.fetched, written=report.fetched)\n",
            ),
            "you assert that the second run's written is 0 (and fetched every launch)",
        ),
    )
}

CONTRACT_VARIANTS: dict[str, tuple[LaidOver, ...]] = {"ingest": ()}

#: `ingest` with nothing changed, laid over every wheat and under every bug, so that each run
#: holds one layer of the same shape (see build 03's).
NEUTRAL: tuple[LaidOver, ...] = (
    LaidOver(
        "ingest_as_it_is",
        "ingest as it is",
        "import pathlib as _laid_pathlib\n"
        + over(
            "ingest",
            "async def ingest(source, path):\n    return await under(source, path)\n",
        ),
    ),
)
