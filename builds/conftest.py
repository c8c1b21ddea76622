"""The hidden suites as pytest suites: one test per graded test name, judged in this process.

``pytest builds/build03/hidden --submission PATH`` grades the notebook at PATH (or the build's
``03_*.ipynb`` in the folder PATH): its answers are exported through the one export path, the
build's probes run on them in a walled-in child (`grader.Runner`, the batch grader's own), and each
``test_<name>`` of the build's judges modules judges the observations, failing with the message a
learner would read. ``--mutant NAME`` grades the solution with that known bug instead; without
either option, no ``builds/*/hidden`` folder is collected (a plain pytest run never grades
anything). The batch grader calls the very same functions without pytest (`grader.suites.loading`);
points and hints stay in each ``build.toml``, and the summary adds them up per build. Each build's
submission runs once per session, however many of its tests are selected; grading twice gives the
same report. Never shipped: the learner copy has no grader.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader import Runner, SuiteError, load_suite
from grader.runtime.results import ProbeRecord
from grader.suites.judging import Observed
from workbook.shared.errors import WorkbookError
from workbook.shared.export import export_source
from workbook.shared.manifest import Entry, load_manifest

HERE = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hidden suites", "grading one submission with builds/*/hidden")
    group.addoption(
        "--submission",
        metavar="PATH",
        help="grade this notebook (or the build's notebook in this folder) with its hidden suite",
    )
    group.addoption(
        "--mutant", metavar="NAME", help="grade the solution with this known bug (mutants.toml)"
    )


def grading(config: pytest.Config) -> bool:
    return bool(config.getoption("submission") or config.getoption("mutant"))


def in_hidden(path: Path) -> bool:
    """Whether `path` is a ``builds/buildNN/hidden`` folder or inside one."""
    path = path.resolve()
    return path.is_relative_to(HERE) and path.relative_to(HERE).parts[1:2] == ("hidden",)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("submission") and config.getoption("mutant"):
        raise pytest.UsageError("give --submission or --mutant, not both")
    hidden_only = all(in_hidden(Path(a.split("::")[0])) for a in config.args)
    if not grading(config) and config.args and hidden_only:
        raise pytest.UsageError(
            "builds/buildNN/hidden grades one submission: add --submission PATH (a notebook,"
            " or a folder holding the build's notebook) or --mutant NAME"
        )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave the hidden suites out unless a submission or a mutant is to be graded, and the
    visible tests out when one is (they read ``WORKBOOK_BUILDS``, never the submission)."""
    path = collection_path.resolve()
    inside = path.relative_to(HERE).parts if path.is_relative_to(HERE) else ()
    if not grading(config):
        return True if in_hidden(path) else None
    return True if len(inside) > 1 and inside[1] != "hidden" else None


@dataclass
class Session:
    """What this pytest run grades: the observations of each build, and what they were of."""

    runner: Runner
    observed: dict[str, Observed] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def build_of(path: Path) -> str:
    """``builds/build03/hidden/test_ids_and_keys.py`` -> ``"03"``."""
    path = path.resolve()
    folder = path.relative_to(HERE).parts[0] if path.is_relative_to(HERE) else ""
    if not folder.startswith("build"):
        raise pytest.UsageError(f"{path}: not in a builds/buildNN/hidden folder")
    return folder.removeprefix("build")


def submission(config: pytest.Config, entry: Entry) -> tuple[str, str]:
    """(label, exported source) of what to grade for `entry`; skips the build's tests when
    the mutant is not one of its known bugs, or the folder holds no notebook of the build."""
    mutant_name = config.getoption("mutant")
    if mutant_name:
        mutants = {m.name: m for m in load_suite(entry.number).mutants}
        if mutant_name not in mutants:
            pytest.skip(f"build {entry.number} has no mutant {mutant_name!r}")
        solution = load_manifest().root / str(entry.solution)
        return f"mutant {mutant_name}", mutants[mutant_name].apply(export_source(solution))
    path = Path(str(config.getoption("submission")))
    if path.is_dir():
        found = sorted(path.glob(f"{entry.number}_*.ipynb"))
        if not found:
            pytest.skip(f"{path} holds no notebook {entry.number}_*.ipynb")
        if len(found) > 1:
            raise pytest.UsageError(f"{path}: {len(found)} notebooks {entry.number}_*.ipynb")
        path = found[0]
    elif re.match(r"\d\d_", path.name) and not path.name.startswith(f"{entry.number}_"):
        raise pytest.UsageError(f"{path} is not a build {entry.number} notebook ({entry.number}_*)")
    return str(path), export_source(path)


def observe(session: Session, config: pytest.Config, build: str) -> Observed:
    """The probes' observations of the submission for `build`, made once per session."""
    if build not in session.observed:
        entry = load_manifest().entry(build)
        suite = load_suite(build)
        try:
            label, source = submission(config, entry)
        except (WorkbookError, SuiteError, OSError) as exc:  # graded as the batch grades it
            records = {n: ProbeRecord(n, "load failed", None, str(exc)) for n in suite.probes.names}
            session.observed[build] = Observed(records)
            session.labels[build] = str(exc).splitlines()[0]
            return session.observed[build]
        run = session.runner.run_probes(source, suite)
        session.observed[build] = Observed(
            run.records, source=source, artefacts=getattr(run, "artefacts", None)
        )
        session.labels[build] = label
    return session.observed[build]


@pytest.fixture(scope="session")
def grading_session() -> Iterator[Session]:
    with Runner() as runner:
        session = Session(runner.start())
        _SESSIONS.append(session)
        yield session


@pytest.fixture
def observed(request: pytest.FixtureRequest, grading_session: Session) -> Observed:
    """The observations the test's build made of the submission being graded."""
    return observe(grading_session, request.config, build_of(request.path))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What was graded, and its points per build (from the manifest) for the tests passed."""
    if not grading(terminalreporter.config):  # the visible tests: nothing was graded
        return
    root = terminalreporter.config.rootpath
    passed: dict[str, set[str]] = {}
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            if getattr(report, "when", "") == "call" and "::test_" in report.nodeid:
                path, test = report.nodeid.split("::", 1)
                if not in_hidden(root / path):  # a test of its own, run beside the suites
                    continue
                names = passed.setdefault(build_of(root / path), set())
                if key == "passed":
                    names.add(test.removeprefix("test_"))
    session = _SESSIONS[-1] if _SESSIONS else None
    for build in sorted(passed):
        entry = load_manifest().entry(build)
        won = sum(t.points for t in entry.tests if t.name in passed[build])
        label = session.labels.get(build, "") if session else ""
        terminalreporter.write_line(f"build {build}: {won}/{entry.max_points} points  {label}")


_SESSIONS: list[Session] = []
