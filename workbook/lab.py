"""`make lab`: JupyterLab on the first notebook of the arc, on 127.0.0.1.

Without a display (a server, a container) it does not try to open a browser; as root it
passes `--allow-root`. Jupyter prints the URL to open, token included.
"""

from __future__ import annotations

import os
import platform
import sys

from workbook.manifest import load_manifest


def lab_command(first: str | None) -> list[str]:
    command = [sys.executable, "-m", "jupyter", "lab", "--ServerApp.ip=127.0.0.1"]
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
    command = lab_command(first)
    opening = f"on {first}" if first else "(no notebook of the arc exists yet)"
    print(f"Starting JupyterLab {opening}.")
    if "--no-browser" in command:
        print("No display here: open the http://127.0.0.1:... URL that Jupyter prints below.")
    sys.stdout.flush()
    os.chdir(manifest.root)
    os.execv(sys.executable, command)
