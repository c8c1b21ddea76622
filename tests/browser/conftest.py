"""Fixtures for the browser tests: one JupyterLab and one Chromium per session, a tab per test.

The whole folder skips, with the reason, when Chromium is not installed; `make check` says so.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser import harness
from tests.browser.harness import ARTIFACTS, ROOT, WORK, LabPage, LabServer, OpenNotebook, Timings

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext


@pytest.fixture(scope="session")
def chromium() -> str:
    path = harness.chromium_path()
    if path is None:
        pytest.skip(
            "Chromium is not installed (apt-get install chromium): the browser tests did not run"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed: the browser tests did not run")
    return path


@pytest.fixture(scope="session")
def scratch(chromium: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="workbook-browser-") as folder:
        yield Path(folder)


@pytest.fixture(scope="session")
def launched(scratch: Path) -> Iterator[LabServer]:
    """JupyterLab serving the repo root, started by `$WORKBOOK_JUPYTER_PYTHON` if set, and
    not yet waited for: Chromium starts while it boots."""
    harness.clear_screenshots()
    harness.copy_notebooks(ROOT, WORK)
    log = scratch / "jupyterlab.log"
    server = LabServer(harness.jupyter_python(), ROOT, scratch / "jupyter", log).launch()
    try:
        yield server
    finally:
        server.stop()
        # The copies are scratch too; the server's log goes next to the screenshots.
        shutil.rmtree(WORK, ignore_errors=True)
        with contextlib.suppress(OSError):
            WORK.parent.rmdir()  # only once no other session is using it
        shutil.copyfile(log, ARTIFACTS / "jupyterlab.log")


@pytest.fixture(scope="session")
def browser(chromium: str, scratch: Path, launched: LabServer) -> Iterator[BrowserContext]:
    with harness.chromium_context(chromium, scratch / "chromium") as context:
        yield context


@pytest.fixture(scope="session")
def lab(launched: LabServer, browser: BrowserContext) -> LabServer:
    """The server, once its API answers."""
    return launched.wait_ready()


@pytest.fixture(scope="session")
def lab_page(browser: BrowserContext, lab: LabServer) -> Iterator[LabPage]:
    """The one JupyterLab tab every test opens its notebooks in."""
    page = browser.new_page()
    page.set_default_timeout(20_000)
    timings = Timings()
    try:
        yield LabPage(page, lab, timings)
    finally:
        timings.write()
        page.close()


@pytest.fixture(scope="session")
def kernel_prefix(lab: LabServer) -> str:
    """`sys.prefix` of the interpreter the kernels should run on."""
    return subprocess.run(
        [lab.python, "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def cell_count(path: Path) -> int:
    return len(json.loads(path.read_text(encoding="utf-8"))["cells"])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[CALL_REPORT] = report
    return report


CALL_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.fixture
def open_notebook(
    lab_page: LabPage, request: pytest.FixtureRequest
) -> Iterator[Callable[[Path], OpenNotebook]]:
    """Open a notebook (a path under `WORK`); stop its kernel after the test, and keep a
    screenshot of the page if the test failed."""
    opened: list[OpenNotebook] = []

    def open_(path: Path) -> OpenNotebook:
        notebook = lab_page.open(path.relative_to(ROOT).as_posix(), cell_count(path))
        opened.append(notebook)
        return notebook

    yield open_
    report = request.node.stash.get(CALL_REPORT, None)
    if report is not None and report.failed:
        with contextlib.suppress(Exception):
            harness.screenshot(lab_page.page, f"FAILED_{request.node.name}")
    for notebook in opened:
        notebook.shut_down()
