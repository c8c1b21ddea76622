"""Build 05's judges of ingest (step 4): what the file holds after runs, failed runs,
re-runs and two processes, read here from the copies the probes kept.
"""

from __future__ import annotations

from builds.build05.hidden import probes as P
from builds.build05.hidden.expected import end_of, file_holds, listing_ids, seeded, stops_with
from grader.suites.judging import JSON, Fail, Observed, equal, learner_text, listed
from workbook.checking.feedback import message, show_outcome


def ingest_call(query: str, script: str = "", path: str = "path") -> str:
    tail = f", {script}" if script else ""
    return f"await ingest(SpaceDevsSource(client, LISTING + {query!r}), {path}){tail}"


def reports(run: JSON, call: str, fetched: int, written: int, note: str = "") -> None:
    end = end_of(run, call)
    if "ok" not in end:
        raise Fail(message(call, show_outcome(end), f"fetched={fetched}, written={written}", note))
    report = end["ok"]
    equal(
        call,
        [report.get("fetched"), report.get("written")],
        [fetched, written],
        say=f"report.fetched == {fetched} and report.written == {written} (ints)",
        note=note,
    )


def test_second_run_writes_zero_new_rows(observed: Observed) -> None:
    seen, rng = seeded(observed, "second_run_writes_zero_new_rows")
    ids = listing_ids(rng)
    note = (
        "Start the sink from the file: IdempotentSink.with_seen(JsonlSink(path), keys read back)."
    )
    for key, query, path, count in (
        ("runs", "?limit=25", "path", P.SMALL),
        ("by_7", "?limit=7", "str(path)", P.BY_7),
    ):
        first, second = listed(seen[key], 2, "two runs", "runs")
        call = ingest_call(query, f"{count} launches", path=path)
        reports(first, call, count, count)
        file_holds(observed, first, call, ids[:count])
        again = call + ", again, with a new source"
        reports(second, again, count, 0, note)
        file_holds(observed, second, again, ids[:count], note)


def test_failure_mid_run_keeps_earlier_pages(observed: Observed) -> None:
    seen, rng = seeded(observed, "failure_mid_run_keeps_earlier_pages")
    ids = listing_ids(rng)
    count = P.SMALL
    call = ingest_call("?limit=10", f"{count} launches, offset 20 answering 404")
    stops_with(seen["failed"], call, "HttpStatus", 404, "Catch nothing: the caller sees it.")
    file_holds(
        observed, seen["failed"], call, ids[:20], "Load each page as it arrives, inside the loop."
    )
    again = ingest_call("?limit=10", "again, the 404 gone")
    reports(seen["rerun"], again, count, count - 20, "The 20 rows in the file are skipped.")
    file_holds(observed, seen["rerun"], again, ids[:count])


def test_two_processes_write_once(observed: Observed) -> None:
    seen, rng = seeded(observed, "two_processes_write_once")
    ids = listing_ids(rng)
    first, second = listed(seen["runs"], 2, "two processes", "runs")
    count = P.SMALL
    call = ingest_call("?limit=25", f"{count} launches, in a new process")
    for run in (first, second):
        if "child" in run:
            child = learner_text(run["child"])
            raise Fail(message(call, f"the process did not report: {child}", "a report"))
    reports(first, call, count, count)
    file_holds(observed, first, call, ids[:count])
    again = ingest_call("?limit=25", "in a second new process, the same file")
    reports(
        second,
        again,
        count,
        0,
        "A new process remembers only what is in the file: read its keys back and start"
        " the sink from them (with_seen).",
    )
    file_holds(observed, second, again, ids[:count])


def test_pages_are_written_as_they_arrive(observed: Observed) -> None:
    seen, rng = seeded(observed, "pages_are_written_as_they_arrive")
    ids = listing_ids(rng)
    run = seen
    call = ingest_call("?limit=10", f"{P.SMALL} launches")
    reports(run, call, P.SMALL, P.SMALL)
    lines = [entry[3] for entry in run["requests"]]
    equal(
        f"{call}: the lines in the file as each page was requested",
        lines,
        list(range(0, P.SMALL, 10)),
        note="await sink.load(page) for each page before asking for the next one: at most"
        " one page in memory, and a failure keeps every page before it.",
    )
    file_holds(observed, run, call, ids[: P.SMALL])


def test_failed_run_keeps_its_pages_and_the_rerun_finishes(observed: Observed) -> None:
    seen, rng = seeded(observed, "failed_run_keeps_its_pages_and_the_rerun_finishes")
    ids = listing_ids(rng)
    count, at = P.SMALL, P.BAD_JSON_AT
    failed, rerun = seen["bad_json"]
    call = ingest_call("?limit=10", f"{count} launches, offset {at} answering a page cut off")
    stops_with(failed, call, "ParseError")
    file_holds(observed, failed, call, ids[:at], "Every page before the failure stays written.")
    again = ingest_call("?limit=10", "again, the page whole")
    reports(rerun, again, count, count - at)
    file_holds(observed, rerun, again, ids[:count])
    at = P.UNAVAILABLE_AT
    failed, rerun = seen["unavailable"]
    call = ingest_call("?limit=10", f"offset {at} answering 503 every time, max_attempts=2")
    stops_with(failed, call, "HttpStatus", 503, "with_retry gives up after two attempts.")
    file_holds(observed, failed, call, ids[:at])
    again = ingest_call("?limit=10", "again, the 503 gone")
    reports(rerun, again, count, count - at)
    file_holds(observed, rerun, again, ids[:count])


def test_keys_on_disk_come_from_the_file(observed: Observed) -> None:
    seen, rng = seeded(observed, "keys_on_disk_come_from_the_file")
    ids = listing_ids(rng)
    run = seen["run"]
    count = P.SMALL
    call = ingest_call(
        "?limit=25",
        f"{count} launches, path already holding the first {P.PREFILLED} and one row not in"
        " the listing",
    )
    reports(
        run,
        call,
        count,
        count - P.PREFILLED,
        "Read the keys of every row already in the file, whoever wrote it:"
        " content_key(Launch(**row)) for row in read_jsonl(path).",
    )
    expected = [*ids[: P.PREFILLED], "not-in-the-listing", *ids[P.PREFILLED : count]]
    file_holds(observed, run, call, expected)


def test_written_counts_rows_that_reached_the_file(observed: Observed) -> None:
    seen, rng = seeded(observed, "written_counts_rows_that_reached_the_file")
    ids = listing_ids(rng)
    run = seen
    call = ingest_call("?limit=10", "a listing of 13 results in which 2 repeat earlier ones")
    reports(
        run,
        call,
        13,
        11,
        "fetched counts the rows the source yielded; written adds up what sink.load returned.",
    )
    file_holds(observed, run, call, [*ids[:11]])


def test_revised_launch_is_written_once_more(observed: Observed) -> None:
    seen, rng = seeded(observed, "revised_launch_is_written_once_more")
    ids = listing_ids(rng)
    first, second, third = listed(seen["runs"], 3, "three runs", "runs")
    count = P.SMALL
    call = ingest_call("?limit=50", f"{count} launches")
    reports(first, call, count, count)
    file_holds(observed, first, call, ids[:count])
    moved = ingest_call("?limit=50", "again, the first launch now one day later")
    reports(
        second,
        moved,
        count,
        1,
        "A launch whose content changed is a new row: its key is new, so it is written, once.",
    )
    file_holds(observed, second, moved, [*ids[:count], ids[0]], "The new version, appended.")
    third_call = ingest_call("?limit=50", "a third time, still moved")
    reports(third, third_call, count, 0)
    file_holds(observed, third, third_call, [*ids[:count], ids[0]])
