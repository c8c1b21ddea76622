"""JupyterLab in Chromium, driven the way a learner drives it: open, wait, Run All, read.

Invariants the tests rely on:
- The server is a throwaway: fresh config, data, runtime, IPython and settings folders, a
  random token, 127.0.0.1 on a free port. Stopping it twice is harmless.
- The notebooks opened are copies under `artifacts/browser/work/` (git-ignored), so nothing
  JupyterLab writes (checkpoints, outputs, autosaves) can touch a tracked file.
- Every wait polls for a condition with a timeout; nothing sleeps a fixed time to let the
  browser "catch up".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from workbook.commands.lab import server_config

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Locator, Page, ViewportSize

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
#: This session's copies; per process, so two suites running in one checkout never collide.
WORK = ARTIFACTS / "work" / f"session-{os.getpid()}"
#: Folders copied into `WORK` for each session (a build may load its sibling build).
COPIED = ("notebooks", "exercises", "solutions")

CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: Any URL whose host is not this machine (data: and blob: URLs are never routed).
NOT_LOCAL = re.compile(r"^(?!(https?|wss?)://(127\.0\.0\.1|localhost)(:\d+)?(/|$))")

VIEWPORT: ViewportSize = {"width": 1400, "height": 1000}

#: How long JupyterLab may take to answer at all, and a notebook to run top to bottom.
SERVER_START_TIMEOUT = 60.0
RUN_ALL_TIMEOUT_MS = 45_000
#: A re-rendered plot counts as settled once its image has not changed for this long: a second
#: redraw of the same move would have to take longer than this to compute to go unseen.
SETTLE_MS = 800

T = TypeVar("T")


def chromium_path() -> str | None:
    """Debian's Chromium (or `$CHROMIUM`), the same lookup `make check` uses."""
    wanted = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    return shutil.which(wanted) or shutil.which("chromium")


def jupyter_python() -> str:
    """The interpreter that runs JupyterLab and its kernels (`$WORKBOOK_JUPYTER_PYTHON`).

    The Binder check points this at a venv built only from `requirements.txt`.
    """
    return os.environ.get("WORKBOOK_JUPYTER_PYTHON") or sys.executable


def wait_until(
    check: Callable[[], T | None],
    timeout: float,
    what: str,
    pause: Callable[[float], object] = time.sleep,
) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout` s.

    With a page open, `pause` must be the page's own wait: Playwright's sync API handles
    browser events (routed requests among them) only while Python is inside a Playwright call.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        pause(0.1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def throwaway_jupyter_env(scratch: Path) -> dict[str, str]:
    """Environment for a Jupyter that reads and writes only under `scratch`."""
    config = scratch / "config"
    settings = config / "lab" / "user-settings"
    # The news toast would cover the notebook in every screenshot.
    _write_json(
        config / "labconfig" / "page_config.json",
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}},
    )
    # All cells stay in the DOM (no virtual scrolling), so every prompt and output can be read.
    _write_json(
        settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
        {"windowingMode": "none"},
    )
    # The copies are never saved: a run's outputs stay in the browser.
    _write_json(
        settings / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings",
        {"autosave": False},
    )
    # What `make lab` writes into the venv (encrypted kernel connections, no trust warnings),
    # so the browser tests run JupyterLab as a learner's `make lab` does, in any venv.
    _write_json(config / "jupyter_server_config.json", server_config())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env.update(
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTER_DATA_DIR=str(scratch / "data"),
        JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"),
        IPYTHONDIR=str(scratch / "ipython"),
    )
    return env


@dataclass
class LabServer:
    """JupyterLab serving `root`: `launch()` starts it, `wait_ready()` waits until its API
    answers (so a browser can start meanwhile), `stop()` ends it and its process group."""

    python: str
    root: Path
    scratch: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None
    port: int = 0
    token: str = ""
    pending: list[threading.Thread] = field(default_factory=list)
    """Kernel shutdowns still in flight; `stop()` lets them finish first."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> LabServer:
        """Start the server on a free port with a fresh token; do not wait for it."""
        self.port, self.token = free_port(), secrets.token_hex(16)
        command = [
            self.python,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                cwd=self.root,
                env=throwaway_jupyter_env(self.scratch),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self) -> LabServer:
        """Return once the API answers. A free port can be taken between our probe and the
        server's bind, so a failed bind relaunches on a new port (the server itself is told
        not to wander to another one), at most three times."""
        for _ in range(3):
            process = self.process
            assert process is not None, "launch() first"

            def answering(process: subprocess.Popen[bytes] = process) -> bool | None:
                if process.poll() is not None:
                    return True  # exited: stop waiting and look at why
                with contextlib.suppress(OSError, ValueError):
                    return self.api("/api/status") is not None
                return None

            try:
                wait_until(answering, SERVER_START_TIMEOUT, f"JupyterLab on port {self.port}")
            except TimeoutError:
                self.stop()
                raise TimeoutError(
                    f"JupyterLab never answered; its log ends:\n{self.log_tail()}"
                ) from None
            if process.poll() is None:
                return self
            if "already in use" not in self.log_tail():
                raise RuntimeError(f"JupyterLab exited at start; its log ends:\n{self.log_tail()}")
            self.launch()
        raise RuntimeError("JupyterLab could not bind a free port in three tries")

    def api(self, path: str, method: str = "GET") -> Any:
        """JSON from the REST API. Raises `urllib.error.HTTPError` on a non-2xx answer."""
        request = urllib.request.Request(
            f"{self.base}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM the group (JupyterLab shuts its kernels down), SIGKILL it if it lingers."""
        for thread in self.pending:
            thread.join(timeout=10)
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def clear_screenshots() -> None:
    """Forget the last session's screenshots, so every one in the folder is from this run.
    Another session in this checkout (someone's `make check`) may be clearing them too."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink(missing_ok=True)


def copy_notebooks(root: Path, dest: Path) -> None:
    """Fresh copies of the notebooks (`*.ipynb` at the top of each of `COPIED`).

    Other people may be rewriting a notebook at this moment (`nbconvert --inplace`, `make
    reset`): a copy is taken only once the file parses as JSON, re-read until it does.
    """
    if dest.exists():
        shutil.rmtree(dest)
    for name in COPIED:
        for notebook in sorted((root / name).glob("*.ipynb")):

            def whole(notebook: Path = notebook) -> str | None:
                try:
                    text = notebook.read_text(encoding="utf-8")
                except FileNotFoundError:
                    return "gone"  # deleted since the listing: nothing to copy
                try:
                    json.loads(text)
                except ValueError:
                    return None
                return text

            text = wait_until(whole, 10.0, f"{notebook} to be a whole notebook again")
            if text != "gone":
                target = dest / name / notebook.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def chromium_context(executable: str, profile: Path) -> Iterator[BrowserContext]:
    """A headless Chromium with a fresh profile that can reach only this machine."""
    from playwright.sync_api import Route, sync_playwright

    def refuse(route: Route) -> None:
        route.abort()

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport=VIEWPORT,
        )
        try:
            # A regex is matched inside the browser driver, so requests to this machine never
            # wait for Python; everything else is aborted.
            context.route(NOT_LOCAL, refuse)
            yield context
        finally:
            context.close()


PROMPTS = ".jp-Notebook .jp-CodeCell .jp-InputPrompt"
OUTPUTS = ".jp-Notebook .jp-OutputArea-output"
#: Tracebacks and anything written to stderr render with this MIME type.
STDERR = f'{OUTPUTS}[data-mime-type="application/vnd.jupyter.stderr"]'

#: Is the Run All started in the panel `scope` finished? No cell is queued or running
#: ("[*]"), and either every code cell has an execution count or a cell raised, which stops
#: the run and leaves the rest blank. Only meaningful once every prompt started blank.
RUN_ALL_DONE = f"""scope => {{
  const root = document.querySelector(scope);
  const prompts = [...root.querySelectorAll('{PROMPTS}')].map(p => p.textContent.trim());
  const counted = p => /^\\[\\d+\\]:$/.test(p);
  if (prompts.some(p => p.includes('*'))) return false;
  if (prompts.length && prompts.every(counted)) return true;
  return prompts.some(counted) && root.querySelector('{STDERR}') !== null;
}}"""

ALL_PROMPTS_BLANK = f"""scope => {{
  const root = document.querySelector(scope);
  return [...root.querySelectorAll('{PROMPTS}')].every(p => !/[0-9*]/.test(p.textContent))
    && root.querySelectorAll('{OUTPUTS}').length === 0;
}}"""

#: The id of the main-area tab whose tooltip names exactly this path.
TAB_FOR_PATH = """path => {
  const tab = [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')]
    .find(t => (t.getAttribute('title') || '').split('\\n').includes('Path: ' + path));
  return tab ? tab.dataset.id : null;
}"""


def menu(page: Page, name: str, command: str) -> None:
    """Click a top menu (e.g. "Run"), then its item for `command` (`data-command`)."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{name}$")).click()
    item = page.locator(f'.lm-Menu-item[data-command="{command}"]')
    item.click()
    item.wait_for(state="detached")


def screenshot(page: Page, name: str, element: Locator | None = None) -> Path:
    """`artifacts/browser/<name>.png`: the window, or all of `element` however tall."""
    path = ARTIFACTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    if element is None:
        page.screenshot(path=str(path))
        return path
    # JupyterLab fills the window and scrolls inside it, so a tall element is cut off at
    # the window's edge: grow the window to fit it, then put it back.
    box = element.bounding_box()
    tall = int(box["height"]) + 300 if box else VIEWPORT["height"]
    page.set_viewport_size({"width": VIEWPORT["width"], "height": max(tall, 1000)})
    try:
        element.scroll_into_view_if_needed()
        element.screenshot(path=str(path))
    finally:
        page.set_viewport_size(VIEWPORT)
    return path


@dataclass
class Timings:
    """(label, what, seconds) for each slow step, written to `artifacts/browser/timings.txt`."""

    rows: list[tuple[str, str, float]] = field(default_factory=list)

    @contextlib.contextmanager
    def __call__(self, label: str, what: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.rows.append((label, what, time.perf_counter() - start))

    def write(self) -> None:
        lines = [f"{s:6.2f} s  {what:<36} {label}" for label, what, s in self.rows]
        (ARTIFACTS / "timings.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass
class LabPage:
    """The session's one JupyterLab tab. Notebooks open in it the way a learner opens a
    second one (File > Open from Path), which costs a second instead of reloading the app.

    If an earlier test left the page unusable (a dialog still open), the app is reloaded.
    """

    page: Page
    server: LabServer
    timings: Timings
    loaded: bool = False

    def pause(self, seconds: float) -> None:
        self.page.wait_for_timeout(seconds * 1000)

    def load(self) -> None:
        with self.timings("JupyterLab", "load the app"):
            # `reset` starts from an empty workspace, whatever an earlier session left.
            self.page.goto(f"{self.server.base}/lab?reset&token={self.server.token}")
            self.page.locator(".jp-LauncherCard").first.wait_for(timeout=30_000)
        self.loaded = True

    def hide_file_browser(self) -> None:
        """The file browser only takes room from the notebook in screenshots."""
        browser = self.page.locator("#filebrowser")
        if browser.is_visible():
            menu(self.page, "View", "filebrowser:toggle-main")
            browser.wait_for(state="hidden")

    def open(self, path: str, cell_count: int, *, wait_kernel: bool = True) -> OpenNotebook:
        """Open `path` (relative to the served root) and wait until its kernel can take a
        Run All (`wait_kernel=False`: until its cells are shown; `kernel_ready` says the rest)."""
        if not self.loaded or self.page.locator(".jp-Dialog").count():
            self.load()
        label = path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1]
        with self.timings(label, "open the notebook"):
            menu(self.page, "File", "filebrowser:open-path")
            dialog = self.page.locator(".jp-Dialog")
            dialog.locator("input").fill(path)
            dialog.locator("input").press("Enter")
            dialog.wait_for(state="detached")
            self.page.wait_for_function(TAB_FOR_PATH, arg=path, timeout=30_000)
            panel_id: str = self.page.evaluate(TAB_FOR_PATH, path)
            # Open from Path has revealed the file in the file browser before the tab opened.
            self.hide_file_browser()
            notebook = OpenNotebook(self, path, panel_id, label)
            self.page.wait_for_function(
                "([scope, n]) => document.querySelectorAll("
                "`${scope} .jp-Notebook .jp-Cell`).length === n",
                arg=[notebook.scope, cell_count],
                timeout=30_000,
            )
        if not wait_kernel:
            return notebook
        with self.timings(label, "wait for an idle, connected kernel"):
            notebook.kernel_id = wait_until(
                notebook.kernel_ready, 30.0, f"the kernel of {path}", self.pause
            )
        return notebook


@dataclass
class OpenNotebook:
    """A notebook open in its own tab of the session's page, on its own kernel. Every
    locator is scoped to its panel: the tabs of earlier tests stay open, hidden."""

    lab_page: LabPage
    path: str
    """Relative to the served root, with forward slashes (as the sessions API spells it)."""
    panel_id: str
    label: str
    kernel_id: str = ""

    @property
    def page(self) -> Page:
        return self.lab_page.page

    @property
    def server(self) -> LabServer:
        return self.lab_page.server

    @property
    def scope(self) -> str:
        return f'[id="{self.panel_id}"]'

    @property
    def panel(self) -> Locator:
        return self.page.locator(self.scope)

    @property
    def cells(self) -> Locator:
        return self.panel.locator(".jp-Notebook .jp-Cell")

    def kernel_ready(self) -> str | None:
        # The toolbar says "idle" before the session exists, and a Run All sent then is lost:
        # only a kernel the page is connected to and that is idle can take it. A 500 means the
        # kernel is still starting.
        try:
            sessions = self.server.api("/api/sessions")
        except (urllib.error.HTTPError, OSError):
            return None
        for session in sessions:
            kernel = session.get("kernel") or {}
            if (
                session.get("path") == self.path
                and kernel.get("connections", 0) > 0
                and kernel.get("execution_state") == "idle"
            ):
                return str(kernel["id"])
        return None

    def activate(self) -> None:
        """Make this the current notebook: the Edit and Run menus act on that one."""
        tab = self.page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab[data-id="{self.panel_id}"]')
        tab.click()
        self.panel.wait_for(state="visible")

    def clear_all_outputs(self) -> None:
        """What a learner sees after Edit > Clear Outputs of All Cells: blank prompts."""
        self.activate()
        menu(self.page, "Edit", "editmenu:clear-all")
        self.page.wait_for_function(ALL_PROMPTS_BLANK, arg=self.scope, timeout=10_000)

    def run_all(self) -> None:
        """Clear every output, Run > Run All Cells, and wait until the run has finished or
        stopped on an error. Clearing first means a stored "[7]:" is never mistaken for a
        fresh one (notebooks may be saved with their outputs)."""
        self.clear_all_outputs()
        with self.lab_page.timings(self.label, "Run All"):
            menu(self.page, "Run", "runmenu:run-all")
            self.page.wait_for_function(
                RUN_ALL_DONE, arg=self.scope, timeout=RUN_ALL_TIMEOUT_MS, polling=100
            )

    def prompts(self) -> list[str]:
        texts: list[str] = self.panel.locator(PROMPTS).evaluate_all(
            "ps => ps.map(p => p.textContent.trim())"
        )
        return texts

    def output_text(self, index: int) -> str:
        """The text of cell `index`'s outputs (notebook order, markdown cells included)."""
        text: str = self.cells.nth(index).locator(".jp-OutputArea").evaluate("el => el.innerText")
        return text

    def all_output_text(self) -> str:
        texts: list[str] = self.panel.locator(".jp-Notebook .jp-OutputArea").evaluate_all(
            "areas => areas.map(a => a.innerText)"
        )
        return "\n".join(texts)

    def error_outputs(self) -> list[str]:
        """Outputs rendered as errors or stderr (a traceback is one of these)."""
        texts: list[str] = self.panel.locator(STDERR).evaluate_all(
            "outs => outs.map(o => o.innerText)"
        )
        return texts

    def screenshot(self, name: str, element: Locator | None = None) -> Path:
        return screenshot(self.page, name, element)

    def shut_down(self) -> None:
        """Stop this notebook's kernel, in the background: the server answers only once the
        kernel has exited, and the next test need not wait for that (`LabServer.stop` does).
        The tab stays open and says "No Kernel"; it is hidden behind the next one."""

        def delete() -> None:
            with contextlib.suppress(urllib.error.HTTPError, OSError):
                for session in self.server.api("/api/sessions"):
                    if session.get("path") == self.path:
                        self.server.api(f"/api/sessions/{session['id']}", method="DELETE")

        thread = threading.Thread(target=delete, name=f"shut down {self.path}", daemon=True)
        thread.start()
        self.server.pending.append(thread)
