"""`grader.runtime.child.worker`: the answers run, then each probe, one JSON line per event;
a load error names its line, a hang is stopped by the alarm, output is captured with a cap.
(Jobs run on the unwalled server of ``tests/unit/grader/runtime/conftest.py``.)"""

from __future__ import annotations

from typing import Any

from grader.runtime.forkclient import ForkServer
from tests.unit.grader.runtime.conftest import BARE_LIMITS, RunJob

GOOD = "def a():\n    return 1\n\ndef b():\n    return 2\n"


def without_seconds(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in ("seconds", "setup")} for e in events]


def test_the_answers_load_then_each_probe_reports_in_order(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    run = run_job(bare_server, GOOD)
    assert without_seconds(run.events) == [
        {"event": "loaded"},
        {"event": "start", "probe": "a"},
        {"event": "done", "probe": "a", "obs": {"ok": 1}},
        {"event": "start", "probe": "b"},
        {"event": "done", "probe": "b", "obs": {"ok": 2}},
        {"event": "end"},
    ]
    assert run.events[0]["seconds"] >= 0 and run.events[0]["setup"] >= 0


def test_an_error_at_load_is_reported_with_the_learner_s_line(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    run = run_job(bare_server, "x = 1\n\ny = undefined + 1\n")
    assert run.events == [
        {"event": "load_error", "error": "NameError: name 'undefined' is not defined", "line": 3}
    ]
    syntax = run_job(bare_server, "def broken(:\n    pass\n")
    assert syntax.events[0]["event"] == "load_error" and syntax.events[0]["line"] == 1


def test_a_hanging_probe_times_out_and_the_next_one_runs(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    run = run_job(bare_server, GOOD.replace("return 1", "while True:\n        pass"))
    events = without_seconds(run.events)
    assert {"event": "timeout", "probe": "a"} in events
    assert {"event": "done", "probe": "b", "obs": {"ok": 2}} in events
    assert run.events[2]["seconds"] >= BARE_LIMITS.probe_seconds


def test_a_probe_that_raises_is_a_probe_error_not_the_end_of_the_worker(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    text = b"from grader.suites.observe import Probes\nPROBES = Probes()\n"
    text += b"PROBES.add('a')(lambda ns: ns.missing)\nPROBES.add('b')(lambda ns: {1, 2})\n"
    run = run_job(bare_server, GOOD, text=text)
    error, unplain = run.events[2], run.events[4]
    assert (error["event"], error["error"]["raised"]) == ("probe_error", "AttributeError")
    assert unplain["event"] == "probe_error"
    assert unplain["error"].startswith("observation is not plain JSON")
    assert run.events[-1] == {"event": "end"}


def test_output_is_captured_and_cut_at_the_cap(bare_server: ForkServer, run_job: RunJob) -> None:
    source = "import sys\n\ndef a():\n    print('hello')\n    print('oops', file=sys.stderr)\n"
    source += f"    print('x' * {BARE_LIMITS.output_bytes * 2})\n    return 1\n"
    run = run_job(bare_server, source)
    assert run.output.startswith("hello\noops\nxxx")
    assert run.output.endswith("\n[output cut here by the grader]\n")
    assert len(run.output) < BARE_LIMITS.output_bytes + 100
    assert without_seconds(run.events)[2] == {"event": "done", "probe": "a", "obs": {"ok": 1}}


def test_the_seams_given_are_the_only_ones_registered(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    source = "from workbook import siblings\n\ndef a():\n    refs = siblings.references()\n"
    source += "    return {b: open(p).read() for b, p in refs.items()}\n"
    run = run_job(bare_server, source, probes=("a",), seams={"03": "SEAM = 3\n"})
    assert run.events[2]["obs"] == {"ok": {"03": "SEAM = 3\n"}}
