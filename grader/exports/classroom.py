"""What the learner copy ships for hosted classrooms: its own requirements, the GitHub
Classroom workflow, and the nbgitpuller link that opens it on a JupyterHub.

- `learner_requirements(text)`: the instructor's ``requirements.txt`` without the instructor's
  tools (Playwright, pytest-xdist, mypy, ruff): what ``make lab``, Binder and a learner's CI
  install.
  Applying it twice changes nothing.
- `classroom_workflow(manifest)`: ``.github/workflows/classroom.yml``, GitHub Classroom's
  autograding on every push: one step per build with visible checks, worth the visible points
  the manifest gives them (the hidden tests stay with the instructor). Made from the manifest,
  so it never disagrees with it.
- `nbgitpuller_link(hub, repo)`: one URL that clones (then updates) the learner copy into a
  hub user's home and opens the first notebook.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote, urlencode

from workbook.shared.manifest import Manifest, load_manifest

#: Instructor-only tools: the browser test, the type checker, the linter and formatter.
INSTRUCTOR_TOOLS = frozenset({"playwright", "pytest-playwright", "pytest-xdist", "mypy", "ruff"})
LEARNER_NOTE = (
    "# The learner's copy: the instructor's tools (Playwright, pytest-xdist, mypy, ruff)"
    " are left out."
)
#: The notebook a hub opens first.
FIRST_NOTEBOOK = "notebooks/01_retry_with_backoff.ipynb"


def _requirement_name(line: str) -> str | None:
    """The normalised project name a requirements line installs (PEP 503), or None for
    comments, options and ``-e .``."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    if match is None or line.lstrip().startswith(("#", "-")):
        return None
    return re.sub(r"[-_.]+", "-", match[1]).lower()


def learner_requirements(text: str) -> str:
    """`text` (a requirements file) without the instructor's tools, with a line saying so
    after the opening comments; every other line as it was, ``-e .`` last as before."""
    lines = [ln for ln in text.splitlines() if _requirement_name(ln) not in INSTRUCTOR_TOOLS]
    if LEARNER_NOTE not in lines:
        at = next((i for i, ln in enumerate(lines) if not ln.startswith("#")), len(lines))
        lines.insert(at, LEARNER_NOTE)
    return "\n".join(lines) + "\n"


def _yaml(text: str) -> str:
    """`text` as a YAML scalar: a JSON string is a valid double-quoted YAML one."""
    return json.dumps(text)


def classroom_workflow(manifest: Manifest | None = None) -> str:
    """GitHub Classroom's autograding workflow for the learner copy: on each push, install the
    learner's requirements and run each build's visible checks as one graded step."""
    manifest = manifest or load_manifest()
    steps = []
    for entry in manifest.graded:
        points = sum(t.points for t in entry.tests if t.visible)
        if points:
            steps.append((f"build{entry.number}", entry, points))
    out = [
        "# GitHub Classroom autograding: each build's visible checks on every push, worth the",
        "# visible points of workbook.toml. Written by `make release` from the manifest: edit",
        "# the manifest, not this file. The hidden tests are graded by the instructor.",
        "name: Autograding Tests",
        "'on':",
        "  - push",
        "  - repository_dispatch",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  run-autograding-tests:",
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    steps:",
        "      - name: Checkout code",
        "        uses: actions/checkout@v4",
        "      - name: Set up Python 3.11",
        "        uses: actions/setup-python@v5",
        "        with:",
        "          python-version: '3.11'",
        "          cache: pip",
        "      - name: Install the workbook",
        "        run: python -m pip install -r requirements.txt",
    ]
    for step, entry, points in steps:
        visible_tests = f"builds/build{entry.number}/visible/test_visible.py"
        out += [
            f"      - name: {_yaml(f'{entry.number} {entry.title}')}",
            f"        id: {step}",
            "        uses: classroom-resources/autograding-command-grader@v1",
            "        with:",
            f"          test-name: {_yaml(f'{entry.number} {entry.title}')}",
            "          setup-command: ''",
            f"          command: python -m pytest -q {visible_tests}",
            "          timeout: 10",
            f"          max-score: {points}",
        ]
    out += [
        "      - name: Autograding Reporter",
        "        uses: classroom-resources/autograding-grading-reporter@v1",
        "        env:",
        *(
            f'          {step.upper()}_RESULTS: "${{{{steps.{step}.outputs.result}}}}"'
            for step, _, _ in steps
        ),
        "        with:",
        f"          runners: {','.join(step for step, _, _ in steps)}",
    ]
    return "\n".join(out) + "\n"


def nbgitpuller_link(
    hub: str, repo: str, *, branch: str = "main", notebook: str = FIRST_NOTEBOOK
) -> str:
    """The nbgitpuller URL that pulls `repo` (its `branch`) into a user's home on the
    JupyterHub at `hub` and opens `notebook` in JupyterLab. Opening it again updates the
    copy and keeps the learner's own changes (nbgitpuller merges, never overwrites)."""
    folder = repo.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    query = urlencode(
        {"repo": repo, "urlpath": f"lab/tree/{folder}/{notebook}", "branch": branch},
        quote_via=quote,
    )
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"
