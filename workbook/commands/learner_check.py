"""`make check` in the learner copy: the learner's own work, one verdict per build, then a run.

First one line per build, read from the *saved* notebooks through the export path, with the
visible checks (the same checks `builds/*/visible` wraps): ``03  done``, ``03  not started`` or
``03  failing: <first failing check>``, and for each failing build what to do next. Then every
build notebook the learner has started runs top to bottom in a fresh kernel (nbval lax's rule:
an error fails, outputs are not compared), two at a time; a failure names the cell as
JupyterLab shows it (the step heading above it, its position counting every cell). It exits 0
only when every build is done and each runs, as rustlings' verify does. ``--build 03`` checks
one build. It writes nothing; running it twice checks everything twice.

Its two parts, and the instructor's (`grader.proofs.soundness`), run through
`workbook.commands.parts.run_parts`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import queue
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbook.commands.parts import Part, run_parts
from workbook.shared.errors import WorkbookError
from workbook.shared.export import cell_source, cell_tags, read_notebook
from workbook.shared.manifest import (
    Entry,
    Manifest,
    UnknownBuild,
    load_manifest,
    pick_builds,
    repo_root,
)

if TYPE_CHECKING:
    from workbook.commands.progress import BuildReport

ROOT = repo_root()
BIN = Path(sys.executable).parent
#: Real seconds one notebook cell may run before the notebook counts as stuck.
CELL_SECONDS = 60
#: Real seconds a kernel may take to start (a loaded machine takes several).
START_SECONDS = 60
#: Notebooks run at once (each in its own kernel): the machines this runs on have 2 cores.
AT_ONCE = 2


# ───────────────────────────────────────────────── the learner's notebooks, run


@dataclass(frozen=True)
class NotebookRun:
    """How one notebook's run ended: `problem` is empty when every cell ran."""

    path: Path
    problem: str = ""
    seconds: float = 0.0


@contextlib.asynccontextmanager
async def kernel_for(path: Path) -> AsyncIterator[Any]:
    """A client of a fresh kernel started as JupyterLab starts one for notebook `path` (in its
    folder, its path in ``JPY_SESSION_NAME``); the kernel is shut down when the block ends."""
    from jupyter_client.manager import AsyncKernelManager

    manager = AsyncKernelManager(kernel_name="python3")
    # The kernel's own stderr carries only its transport warnings: what cells print goes
    # to the kernel's output messages.
    await manager.start_kernel(
        cwd=str(path.parent),
        env={**os.environ, "JPY_SESSION_NAME": str(path)},
        stderr=subprocess.DEVNULL,
    )
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=START_SECONDS)
        yield client
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)


async def run_notebook(path: Path) -> NotebookRun:
    """Run `path`'s code cells top to bottom in a fresh kernel (`kernel_for`), each sent with
    its cell id; stop at the first cell that raises, unless it is tagged ``raises-exception``.
    Nothing is written back. (Driven through jupyter_client directly: nbclient would import
    nbformat's schema validator, whose dependencies take seconds to import.)"""
    from workbook.checking.notebook_cells import cell_name

    start = time.perf_counter()
    cells = read_notebook(path)["cells"]
    problem = ""
    try:
        async with kernel_for(path) as client:
            for index, cell in enumerate(cells, 1):
                if cell.get("cell_type") != "code" or not cell_source(cell).strip():
                    continue
                reply = await execute_cell(client, cell_source(cell), cell.get("id"))
                where = cell_name(cells, index)
                if reply is None:
                    problem = (
                        f"{where} was still running after {CELL_SECONDS} s: a loop that never ends?"
                    )
                    break
                content = reply["content"]
                if content.get("status") == "error" and "raises-exception" not in cell_tags(cell):
                    name, value = content.get("ename", ""), content.get("evalue", "")
                    text = value if name == "DemoError" else f"{name}: {value}"
                    problem = f"{where} raised " + "\n      ".join(text.splitlines()[:8])
                    break
    except RuntimeError as exc:  # the kernel died, or never came up
        problem = f"the kernel stopped: {exc}"
    return NotebookRun(path, problem, time.perf_counter() - start)


async def execute_cell(
    client: Any, source: str, cell_id: object = None, outputs: list[str] | None = None
) -> dict[str, Any] | None:
    """Send one cell as JupyterLab does (its cell id in the request's metadata) and wait for
    the reply and the kernel's output for it (appended to `outputs`, text only: streams,
    results, an error's traceback); None when `CELL_SECONDS` pass first."""
    content = {
        "code": source,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    metadata = {"cellId": cell_id} if isinstance(cell_id, str) else {}
    request = client.session.msg("execute_request", content, metadata=metadata)
    client.shell_channel.send(request)
    ours = request["header"]["msg_id"]
    deadline = time.monotonic() + CELL_SECONDS
    reply: dict[str, Any] | None = None
    idle = False
    try:
        while reply is None and (left := deadline - time.monotonic()) > 0:
            message = await client.get_shell_msg(timeout=left)
            reply = message if message["parent_header"].get("msg_id") == ours else None
        # Read this cell's output to its end (the kernel goes idle), so none is left queued.
        while not idle and (left := deadline - time.monotonic()) > 0:
            message = await client.get_iopub_msg(timeout=left)
            if message["parent_header"].get("msg_id") != ours:
                continue
            kind, body = message["msg_type"], message["content"]
            idle = kind == "status" and body.get("execution_state") == "idle"
            if outputs is None:
                continue
            if kind == "stream":
                outputs.append(body.get("text", ""))
            elif kind in ("execute_result", "display_data"):
                outputs.append(body.get("data", {}).get("text/plain", ""))
            elif kind == "error":
                outputs.append("\n".join(body.get("traceback", [])))
    except queue.Empty:
        return None
    return reply if idle else None


def run_notebooks(paths: Sequence[Path]) -> list[NotebookRun]:
    """`run_notebook` for each path, `AT_ONCE` at a time; the runs in the order of `paths`."""

    async def all_of() -> list[NotebookRun]:
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(path: Path) -> NotebookRun:
            async with gate:
                return await run_notebook(path)

        return list(await asyncio.gather(*(one(p) for p in paths)))

    return asyncio.run(all_of())


# ───────────────────────────────────────────────── the learner's make check


def learner_check(builds: Sequence[str] = (), manifest: Manifest | None = None) -> int:
    """The learner copy's `make check` (see the module docstring); `builds` narrows it."""
    from workbook.commands.progress import tracked_builds

    manifest = manifest or load_manifest()
    entries: list[Entry] = tracked_builds(manifest)
    try:
        asked = pick_builds(builds, [e.number for e in entries])
    except UnknownBuild as exc:
        print(exc)
        return 2
    entries = [e for e in entries if e.number in asked]
    builds = asked if builds else []
    if not entries:
        print("No build notebook exists yet, so there is nothing to check.")
        return 0
    reports: list[BuildReport] = []
    verdicts = functools.partial(_verdicts, manifest, entries, reports)
    notebooks = functools.partial(_notebooks, manifest, reports)
    code = run_parts(
        [
            Part("your builds (the visible checks)", call=verdicts),
            Part("your notebooks run top to bottom", call=notebooks),
        ],
        None,
        passed="make check passed: every build is done."
        if not builds
        else f"make check passed: build {', '.join(builds)} is done.",
    )
    if code:
        todo = [f"{r.entry.number} {r.verdict}" for r in reports if not r.done]
        if todo:
            print(f"Not done yet: {'; '.join(todo)}. `make check` passes once they are.")
    return code


def _verdicts(manifest: Manifest, entries: Sequence[Entry], reports: list[BuildReport]) -> int:
    """The first part of the check: each build's verdict (its report added to `reports`),
    then the next steps of each build started and not done."""
    from workbook.commands.progress import build_report, next_steps, saved_note

    reports.extend(build_report(manifest, entry) for entry in entries)
    print(saved_note(reports))
    for report in reports:
        print(f"{report.entry.number}  {report.verdict}")
    for report in reports:
        if report.started and not report.done:
            print(f"\n{report.entry.number}:")
            print("\n".join(next_steps(report)))
    return 0 if all(r.done for r in reports) else 1


def _notebooks(manifest: Manifest, reports: Sequence[BuildReport]) -> int:
    """The second part: every started build's notebook run top to bottom."""
    started = [r for r in reports if r.started]
    skipped = [r.entry.number for r in reports if not r.started]
    runs = run_notebooks([manifest.root / r.entry.path for r in started])
    for run in runs:
        shown = run.path.relative_to(manifest.root)
        if run.problem:
            print(f"✗ {shown}: {run.problem}")
        else:
            print(f"✓ {shown} runs to the end ({run.seconds:.1f} s)")
    if skipped:
        print(f"(not started, so not run: {', '.join(skipped)})")
    return 1 if any(run.problem for run in runs) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbook.commands.learner_check")
    parser.add_argument("--build", action="append", default=[], help="only this build, e.g. 03")
    parser.add_argument("--submissions", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    # The learner's check keeps nothing between runs: FRESH=1 changes nothing here.
    parser.add_argument("--fresh", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.submissions:
        print("Class grading needs the hidden suites: run it in the instructor's repository.")
        return 2
    try:
        return learner_check(args.build)
    except WorkbookError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
