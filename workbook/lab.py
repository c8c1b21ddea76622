"""`make lab`: JupyterLab on the first notebook of the arc, on 127.0.0.1.

The server's root is the repository (so the file browser shows every folder) and the URL it
prints opens the first notebook directly. Without a display (a server, a container) it does
not try to open a browser; as root it passes `--allow-root`.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import socket
import sys
from pathlib import Path
from urllib.parse import quote

from workbook.manifest import load_manifest


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
    ]
    headless = platform.system() == "Linux" and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    if headless:
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    if first:
        command.append(first)
    return command


def main() -> int:
    manifest = load_manifest()
    entry = manifest.first_existing()
    first = entry.path if entry else None
    quiet_news()
    port, token = free_port(), secrets.token_hex(24)
    command = lab_command(manifest.root, first, port, token)
    page = f"lab/tree/{quote(first)}" if first else "lab"
    print(
        f"Starting JupyterLab {'on ' + first if first else '(no notebook of the arc exists yet)'}."
    )
    print(
        f"Open this URL (Ctrl-C here stops the server):\n\n    http://127.0.0.1:{port}/{page}?token={token}\n"
    )
    sys.stdout.flush()
    os.chdir(manifest.root)
    os.execv(sys.executable, command)
