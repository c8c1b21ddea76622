"""`make lab`: JupyterLab on 127.0.0.1, open on the notebook the learner is up to.

The server's root is the repository (so the file browser shows every folder). It opens the
notebook after the last build that is done, in arc order (a fresh clone opens 01; with 03 done,
04), and prints ``http://127.0.0.1:PORT/lab/tree/<notebook>?token=<hex>`` once the server
answers (a click on it at once works). A repeat while a server for this repository runs
starts nothing: it prints that server's URL again.

The terminal stays quiet: the server logs only warnings, and the Jupyter config written into
the venv encrypts the kernels' connections (so ipykernel has no plain-TCP warning to give) and
drops "Notebook ... is not trusted" (nothing a learner can act on). Without a display (a
server, a container) it does not try to open a browser; as root it passes `--allow-root`.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from workbook.shared.manifest import Entry, Manifest, load_manifest


def free_port(preferred: int = 8888) -> int:
    """`preferred` when nothing listens there, else a port the OS hands out."""
    for port in (preferred, 0):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen: int = probe.getsockname()[1]
            return chosen
    raise OSError("no free port on 127.0.0.1")


#: Settings for this venv's JupyterLab: no "get notified about Jupyter news?" prompt (there is
#: no network to fetch news from, and a learner should meet the notebook, not a dialog).
OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}


def quiet_news(prefix: Path = Path(sys.prefix)) -> Path:
    """Write the venv's JupyterLab settings overrides unless some already exist."""
    path = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(OVERRIDES, indent=2) + "\n", encoding="utf-8")
    return path


class Unactionable(logging.Filter):
    """Drops the two lines of Jupyter Server's log a learner cannot act on.

    - "Notebook X is not trusted": every notebook opened from a clone says it (trust is a
      signature this machine has not made yet), and the only remedy, trusting the whole
      repository, is not one a learner should be asked to make.
    - "The websocket_ping_timeout (90000) cannot be longer than the websocket_ping_interval":
      tornado reads Jupyter Server's ping settings, which are in milliseconds, as seconds.
      Jupyter Server's own keep-alive needs its timeout longer than its interval (set equal,
      it closes every kernel connection after 30 s), so no setting silences it honestly.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Notebook %s is not trusted":
            return False
        return not str(record.msg).startswith("The websocket_ping_timeout (")


def server_config() -> dict[str, Any]:
    """The Jupyter Server config `make lab` writes into the venv (every server started from
    this venv reads it, `make lab`'s and the browser tests' alike)."""
    config: dict[str, Any] = {
        "ServerApp": {
            "logging_config": {
                "filters": {"unactionable": {"()": f"{__name__}.{Unactionable.__name__}"}},
                "handlers": {"console": {"filters": ["unactionable"]}},
            }
        }
    }
    import zmq

    # CurveZMQ between the server and each kernel: ipykernel then has no reason to warn that
    # code and outputs cross 127.0.0.1 in plain text. Only where pyzmq has curve ("auto" is
    # refused at startup otherwise, and the warning is then the truth).
    if zmq.has("curve"):
        config["MappingKernelManager"] = {"transport_encryption": "auto"}
    return config


def write_server_config(prefix: Path = Path(sys.prefix)) -> Path:
    """Write `server_config` as the venv's ``etc/jupyter/jupyter_server_config.json`` (the
    ``.d`` folder beside it is read for enabling extensions only); unchanged text is kept."""
    path = prefix / "etc" / "jupyter" / "jupyter_server_config.json"
    text = json.dumps(server_config(), indent=2, sort_keys=True) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


def lab_command(root: Path, first: str | None, port: int, token: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        # The URL printed once the server answers is the one to open; the server's own
        # start-up chatter (extensions linked, language servers not installed) is noise.
        "--ServerApp.log_level=WARN",
        "--LabApp.log_level=WARN",
    ]
    if headless():
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    if first:
        command.append(first)
    return command


def headless() -> bool:
    return platform.system() == "Linux" and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


def build_done(manifest: Manifest, entry: Entry) -> bool:
    """Does every visible check of `entry` pass on its saved notebook? (`make progress`'s
    verdict, read the same way.)"""
    from workbook.commands.progress import build_report

    return build_report(manifest, entry).done


def notebook_to_open(
    manifest: Manifest, done: Callable[[Manifest, Entry], bool] = build_done
) -> tuple[Entry | None, str]:
    """The notebook after the last build that is done, in arc order, and why it was chosen.

    A fresh clone opens the first notebook. Builds are tried from the last one back, so only
    the builds after the learner's last finished one are checked (`done(manifest, entry)`).
    With every build done, the notebook after the last build (the quiz) opens.
    """
    entries = [e for e in manifest.entries if (manifest.root / e.path).exists()]
    for build in reversed([e for e in entries if e.kind == "build"]):
        if done(manifest, build):
            after = entries[entries.index(build) + 1 :]
            chosen = after[0] if after else build
            return chosen, f"Build {build.number} is done: opening notebook {chosen.number}."
    if not entries:
        return None, "No notebook of the arc exists yet."
    return entries[0], f"Opening notebook {entries[0].number}."


def lab_url(port: int, notebook: str | None, token: str, base_url: str = "/") -> str:
    page = f"lab/tree/{quote(notebook)}" if notebook else "lab"
    query = f"?token={token}" if token else ""
    return f"http://127.0.0.1:{port}{base_url}{page}{query}"


def running_server(root: Path) -> dict[str, Any] | None:
    """A Jupyter server whose root is `root` and that answers, from Jupyter's runtime files.

    A server that crashed can leave its file behind (and its pid reused), so only an answer
    from its API counts. Read by hand: `jupyter_server.serverapp` takes seconds to import."""
    from jupyter_core.paths import jupyter_runtime_dir

    for file in sorted(Path(jupyter_runtime_dir()).glob("jpserver-*.json")):
        try:
            info: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
            if Path(info["root_dir"]).resolve() != root.resolve():
                continue
            status = f"http://127.0.0.1:{info['port']}{info.get('base_url', '/')}api/status"
            headers = {"Authorization": f"token {info.get('token', '')}"}
            with urllib.request.urlopen(urllib.request.Request(status, headers=headers), timeout=3):
                return info
        except (OSError, ValueError, KeyError, TypeError):
            continue  # half-written, stale, or not ours to read: not a server to reuse
    return None


def main() -> int:
    manifest = load_manifest()
    entry, why = notebook_to_open(manifest)
    path = entry.path if entry else None
    quiet_news()
    write_server_config()
    print(why)
    running = running_server(manifest.root)
    if running is not None:
        url = lab_url(running["port"], path, running.get("token", ""), running.get("base_url", "/"))
        print(f"JupyterLab already serves this repository (pid {running['pid']}); open:")
        print(f"\n    {url}\n")
        if not headless():
            webbrowser.open(url)
        return 0
    port, token = free_port(), secrets.token_hex(24)
    command = lab_command(manifest.root, path, port, token)
    # Ctrl-C reaches the server too (one process group): it shuts down, and so does this.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = subprocess.Popen(command, cwd=manifest.root)
    signal.signal(signal.SIGTERM, lambda signum, frame: server.terminate())
    if answers(port, token, server):
        print(
            f"Open this URL (Ctrl-C here stops the server):\n\n    {lab_url(port, path, token)}\n"
        )
        sys.stdout.flush()
    return server.wait()


def answers(port: int, token: str, server: subprocess.Popen[bytes], seconds: float = 120.0) -> bool:
    """Whether the server started on `port` answers its status page within `seconds` (False
    as soon as it has exited): the URL is printed only once a click on it would work."""
    status = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {token}"}
    )
    deadline = time.monotonic() + seconds
    while server.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(status, timeout=3):
                return True
        except OSError:  # refused while it starts (URLError is an OSError)
            time.sleep(0.2)
    return False
