"""`make lab`: which notebook it opens, the URL it prints, the quiet config it writes, and the
running server a second `make lab` reuses."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import logging.config
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from traitlets.utils.nested_update import nested_update

from tests.browser.harness import wait_until
from workbook.commands.lab import (
    OVERRIDES,
    Unactionable,
    free_port,
    lab_command,
    lab_url,
    notebook_to_open,
    quiet_news,
    running_server,
    server_config,
    write_server_config,
)
from workbook.shared.manifest import Entry, Manifest, copy_manifest, load_manifest


def test_serves_the_repo_root_and_opens_the_notebook(root: Path) -> None:
    command = lab_command(root, "notebooks/01_retry_with_backoff.ipynb", 8890, "t0k")
    assert f"--ServerApp.root_dir={root}" in command
    assert command[-1] == "notebooks/01_retry_with_backoff.ipynb"
    assert "--ServerApp.ip=127.0.0.1" in command and "--IdentityProvider.token=t0k" in command
    assert "--ServerApp.log_level=WARN" in command


def test_headless_and_root_flags(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    command = lab_command(root, None, 8890, "t")
    assert ("--no-browser" in command) is (os.uname().sysname == "Linux")
    assert ("--allow-root" in command) is (os.geteuid() == 0)


def test_free_port_avoids_a_taken_one() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert free_port(busy) != busy


def test_news_prompt_is_switched_off_once(tmp_path: Path) -> None:
    """The overrides file is written when absent and left alone when present."""
    path = quiet_news(tmp_path)
    assert json.loads(path.read_text()) == OVERRIDES
    path.write_text("{}")
    quiet_news(tmp_path)
    assert path.read_text() == "{}"


def test_the_url_opens_the_notebook_with_the_token() -> None:
    assert (
        lab_url(8888, "exercises/03_build_retry_and_sink.ipynb", "ab12")
        == "http://127.0.0.1:8888/lab/tree/exercises/03_build_retry_and_sink.ipynb?token=ab12"
    )
    assert (
        lab_url(8888, "a b.ipynb", "", "/base/")
        == "http://127.0.0.1:8888/base/lab/tree/a%20b.ipynb"
    )


# --- which notebook ------------------------------------------------------------------------


def arc_copy(tmp_path: Path, root: Path, solved: tuple[str, ...] = ()) -> Path:
    """The manifest and the arc's notebooks, with the builds in `solved` replaced by their
    solutions (saved, as `make progress` reads them)."""
    copy_manifest(root, tmp_path)
    for folder in ("notebooks", "exercises"):
        (tmp_path / folder).mkdir()
        for notebook in (root / folder).glob("*.ipynb"):
            shutil.copy(notebook, tmp_path / folder / notebook.name)
    for number in solved:
        entry = load_manifest(root / "workbook.toml").entry(number)
        assert entry.solution
        shutil.copy(root / entry.solution, tmp_path / entry.path)
    return tmp_path / "workbook.toml"


def test_a_fresh_clone_opens_the_first_notebook(tmp_path: Path, root: Path) -> None:
    entry, why = notebook_to_open(load_manifest(arc_copy(tmp_path, root)))
    assert entry is not None and entry.number == "01"
    assert why == "Opening notebook 01."


def test_with_build_03_done_it_opens_notebook_04(tmp_path: Path, root: Path) -> None:
    entry, why = notebook_to_open(load_manifest(arc_copy(tmp_path, root, solved=("03",))))
    assert entry is not None and entry.path == "notebooks/04_write_keys_that_survive_reruns.ipynb"
    assert why == "Build 03 is done: opening notebook 04."


def test_the_last_build_done_decides_in_arc_order(root: Path) -> None:
    """A later build done counts even when an earlier one is not; only the builds from the
    last one back to it are checked."""
    manifest = load_manifest(root / "workbook.toml")
    asked: list[str] = []

    def done(_: Manifest, entry: Entry) -> bool:
        asked.append(entry.number)
        return entry.number == "05"

    entry, _ = notebook_to_open(manifest, done)
    assert entry is not None and entry.number == "06"
    assert asked == ["07", "05"]
    everything, why = notebook_to_open(manifest, lambda _m, _e: True)
    assert everything is not None and everything.number == "08"
    assert why == "Build 07 is done: opening notebook 08."


# --- the quiet config ----------------------------------------------------------------------


def test_server_config_is_written_once_and_rewritten_only_when_it_changes(tmp_path: Path) -> None:
    path = write_server_config(tmp_path)
    assert path == tmp_path / "etc/jupyter/jupyter_server_config.json"
    assert json.loads(path.read_text()) == server_config()
    before = path.stat().st_mtime_ns
    write_server_config(tmp_path)
    assert path.stat().st_mtime_ns == before
    path.write_text("{}")
    assert json.loads(write_server_config(tmp_path).read_text()) == server_config()


def test_the_logging_config_drops_only_the_trust_and_ping_lines() -> None:
    """Applied as traitlets applies it (merged over the app's console handler)."""
    stream = io.StringIO()
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"console": {"class": "logging.StreamHandler", "stream": stream}},
        "loggers": {"LabTestApp": {"level": "DEBUG", "handlers": ["console"]}},
    }
    nested_update(config, server_config()["ServerApp"]["logging_config"])
    logging.config.dictConfig(config)
    log = logging.getLogger("LabTestApp")
    log.warning("Notebook %s is not trusted", "notebooks/01.ipynb")
    log.warning(
        "The websocket_ping_timeout (90000) cannot be longer than the websocket_ping_interval"
        " (30000).\nSetting websocket_ping_timeout=30000"
    )
    log.warning("Kernel %s died", "k1")
    assert stream.getvalue() == "Kernel k1 died\n"
    assert Unactionable().filter(logging.makeLogRecord({"msg": "other %s", "args": ("x",)}))


# --- reusing a running server --------------------------------------------------------------


@contextlib.contextmanager
def status_server() -> Iterator[int]:
    """A real HTTP server answering /api/status (what `running_server` asks)."""

    class Status(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/api/status" and self.headers["Authorization"] == "token t0k"
            self.send_response(200 if ok else 403)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def runtime_file(folder: Path, pid: int, port: int, root: Path, token: str = "t0k") -> None:
    info = {"base_url": "/", "pid": pid, "port": port, "root_dir": str(root), "token": token}
    (folder / f"jpserver-{pid}.json").write_text(json.dumps(info))


def test_a_live_server_for_this_root_is_found_and_others_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    assert running_server(root) is None  # no runtime files at all
    with status_server() as port:
        runtime_file(tmp_path, 101, port, tmp_path / "elsewhere")  # another repository
        runtime_file(tmp_path, 102, free_port(0), root)  # stale: nothing listens
        runtime_file(tmp_path, 103, port, root, token="wrong")  # refuses us
        (tmp_path / "jpserver-104.json").write_text('{"port": ')  # half-written
        assert running_server(root) is None
        runtime_file(tmp_path, 105, port, root)
        found = running_server(root)
    assert found is not None and (found["pid"], found["port"]) == (105, port)


@pytest.mark.slow
def test_make_lab_twice_one_server_one_url_and_a_quiet_terminal(tmp_path: Path, root: Path) -> None:
    """The real thing: `python -m workbook lab` starts JupyterLab; a kernel starts without a
    warning and a notebook opens without "not trusted"; the second run reuses the server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    log = tmp_path / "lab.log"
    command = [sys.executable, "-m", "workbook", "lab"]
    with log.open("wb") as out:
        first = subprocess.Popen(
            command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url_pattern = re.compile(r"http://127\.0\.0\.1:(\d+)/lab/tree/(\S+)\?token=([0-9a-f]+)")
    try:
        found = wait_until(lambda: url_pattern.search(log.read_text()), 120, "the URL")
        port, notebook, token = found[1], found[2], found[3]
        assert notebook == "notebooks/01_retry_with_backoff.ipynb"

        def api(path: str, body: bytes | None = None) -> object:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{path}",
                data=body,
                headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())

        api("/api/status")  # printed only once it answers: no waiting here
        api(f"/api/contents/{notebook}?content=1")  # what opening the notebook asks
        session = {"path": notebook, "type": "notebook", "kernel": {"name": "python3"}}
        api("/api/sessions", json.dumps(session).encode())
        said: list[dict[str, Any]] = []

        kernel = next(iter(api("/api/kernels")))  # type: ignore[call-overload]
        # The server reports "starting" until a browser connects: ask the kernel itself,
        # through its connection file (with its CurveZMQ keys when the config asked for them).
        client = BlockingKernelClient(
            connection_file=str(tmp_path / "runtime" / f"kernel-{kernel['id']}.json")
        )
        client.load_connection_file()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=60)
            reply = client.execute_interactive("print(6 * 7)", timeout=30, output_hook=said.append)
        finally:
            client.stop_channels()
        assert reply["content"]["status"] == "ok"
        assert [m["content"]["text"] for m in said if m["msg_type"] == "stream"] == ["42\n"]
        second = subprocess.run(
            command, cwd=root, env=env, capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 0, second.stderr
        again = url_pattern.search(second.stdout)
        assert again is not None and (again[1], again[2], again[3]) == (port, notebook, token)
        assert "already serves this repository" in second.stdout
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGTERM)
        first.wait(timeout=20)
    lines = log.read_text().splitlines()
    assert lines[0] == "Opening notebook 01."
    noise = [
        line for line in lines if re.search(r"WARNING|\[W |not trusted|without encryption|!!", line)
    ]
    assert noise == [], "\n".join(lines)
