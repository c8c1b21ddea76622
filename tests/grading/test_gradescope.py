"""Scale on existing engines: the Gradescope bundle, run in a root laid out like Gradescope's;
the container for graders off Linux; GitHub Classroom's workflow and the learner's install.

`run_autograder` runs for real here, in a temporary root (``source/``, ``submission/``,
``results/``), and its ``results.json`` is validated against Gradescope's documented format
(written below as a JSON schema and checked with `jsonschema`). No Docker daemon and no GitHub
runner exist on this machine: the Dockerfile is linted and the workflow parsed, statically.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

# Both come with JupyterLab (jupyter-events needs them); neither ships type stubs.
import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]

from grader.exports import gradescope
from grader.exports.classroom import classroom_workflow, learner_requirements, nbgitpuller_link
from tests.grading.fixtures.downloads import notebooks
from workbook.shared.manifest import load_manifest

MANIFEST = load_manifest()
ROOT = MANIFEST.root

# Gradescope's results.json, as its autograder specification documents it.
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
TEST_SCHEMA = {
    "type": "object",
    "required": ["name", "score", "max_score", "output", "visibility"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "name_format": FORMAT,
        "number": {"type": "string"},
        "score": {"type": "number", "minimum": 0},
        "max_score": {"type": "number", "minimum": 0},
        "status": {"enum": ["passed", "failed"]},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "tags": {"type": "array", "items": {"type": "string"}},
        "visibility": VISIBILITY,
        "extra_data": {"type": "object"},
    },
}
RESULTS_SCHEMA = {
    "type": "object",
    "required": ["score", "execution_time", "tests", "visibility", "stdout_visibility"],
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number", "minimum": 0},
        "execution_time": {"type": "integer", "minimum": 0},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "test_output_format": FORMAT,
        "test_name_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": TEST_SCHEMA},
        "leaderboard": {"type": "array"},
    },
}


def validate(data: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(RESULTS_SCHEMA)
    jsonschema.validate(data, RESULTS_SCHEMA, cls=jsonschema.Draft202012Validator)


# ---------------------------------------------------------------------------------------
# The bundle.


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return gradescope.build_bundle(tmp_path_factory.mktemp("bundle"))


def test_the_bundle_has_its_scripts_on_top_and_the_grader_inside(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as archive:
        infos = {i.filename: i for i in archive.infolist()}
        requirements = archive.read("requirements.txt").decode()
    for script in ("setup.sh", "run_autograder"):
        mode = infos[script].external_attr >> 16
        assert stat.S_ISREG(mode) and mode & 0o111, f"{script} is not executable"
    names = set(infos)
    for needed in (
        "grader/exports/gradescope.py",
        "grader/classes/batch.py",
        "builds/build03/hidden/probes.py",
        "builds/build03/hidden/mutants.toml",
        "builds/build03/hidden/seams.py",
        "builds/__init__.py",
        "workbook.toml",
        "pyproject.toml",
        "LICENSE",
        "etl/__init__.py",
        "workbook/__init__.py",
        MANIFEST.entry("03").path,
        str(MANIFEST.entry("03").solution),  # the reference the learner's own tests run on
    ):
        assert needed in names, needed
    assert not [n for n in names if n.startswith((".git/", "notebooks/"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert "playwright" not in requirements and requirements.rstrip().endswith("-e .")


def test_the_same_repository_gives_the_same_bundle(bundle: Path, tmp_path: Path) -> None:
    assert gradescope.build_bundle(tmp_path).read_bytes() == bundle.read_bytes()


def test_make_autograder_is_an_instructor_target() -> None:
    makefile = (ROOT / "Makefile").read_text()
    instructor = makefile.split("# ---- instructor only:", 1)[1]
    assert re.search(r"^autograder: .*## ", instructor, re.M)
    assert "grader.exports.gradescope bundle --out" in instructor


# ---------------------------------------------------------------------------------------
# run_autograder in a root laid out like Gradescope's.


def gradescope_root(bundle: Path, root: Path, submission: dict[str, bytes]) -> Path:
    """What Gradescope builds: the bundle unzipped in source/ (modes kept, as unzip does),
    run_autograder copied beside it, the learner's files in submission/, results/ empty."""
    with zipfile.ZipFile(bundle) as archive:
        for info in archive.infolist():
            target = root / "source" / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(info))
            target.chmod((info.external_attr >> 16) & 0o777)
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    (root / "run_autograder").chmod(0o755)
    for name, data in submission.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    (root / "results").mkdir()
    return root


@pytest.mark.slow
def test_run_autograder_writes_results_gradescope_accepts(bundle: Path, tmp_path: Path) -> None:
    submission = notebooks({"03": "solution", "05": "exercise"})
    root = gradescope_root(bundle, tmp_path / "autograder", submission)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((root / "results" / "results.json").read_text())
    validate(data)
    # The bundle's own grader ran, not this repository's.
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import grader, workbook.shared.manifest as m; print(m.repo_root())",
        ],
        env={**env, "PYTHONPATH": str(root / "source")},
        cwd=root / "source",
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()) == root / "source"
    graded = [
        e for e in MANIFEST.graded if (ROOT / "builds" / f"build{e.number}" / "hidden").is_dir()
    ]
    specs = {f"{e.number} {t.name}": t for e in graded for t in e.every_test}
    assert [t["name"] for t in data["tests"]] == list(specs)
    assert (
        data["score"] == MANIFEST.entry("03").max_points == sum(t["score"] for t in data["tests"])
    )
    for test in data["tests"]:
        spec = specs[test["name"]]
        assert test["visibility"] == ("visible" if spec.visible else "after_published")
        assert test["max_score"] == spec.points
        if not test["name"].startswith("03 "):
            assert test["score"] == 0 and test["status"] == "failed"
    # Nothing of a hidden test reaches the learner before the grades are published.
    hidden = [t for t in data["tests"] if t["visibility"] != "visible"]
    assert hidden and data["stdout_visibility"] == "hidden"
    assert not [t for t in hidden if t["name"].split(" ", 1)[1] in data["output"]]
    assert "07: not submitted" in data["output"]
    # Bubblewrap runs here, so the learner's code was walled in inside the container too.
    assert data["extra_data"]["walls"] == "bwrap"


def test_a_grading_that_fails_still_gives_valid_results() -> None:
    data = gradescope.failed("ServerError: the fork server did not start", 3.2)
    validate(data)
    assert data["score"] == 0 and "not about your work" in data["output"]


def test_run_autograder_honours_autograder_root() -> None:
    assert 'ROOT="${AUTOGRADER_ROOT:-/autograder}"' in gradescope.RUN
    assert 'cd "$ROOT/source"' in gradescope.RUN and "WALLS=container" in gradescope.RUN
    for script in (gradescope.RUN, gradescope.SETUP):
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)


# ---------------------------------------------------------------------------------------
# The container for graders off Linux: linted, since no Docker daemon runs here.


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", dockerfile)
    out = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def test_the_dockerfile_builds_a_grader_with_its_walls() -> None:
    steps = instructions((ROOT / "Dockerfile").read_text())
    kinds = [kind for kind, _ in steps]
    assert kinds[0] == "FROM" and re.fullmatch(r"python:3\.11-slim(-bookworm)?", steps[0][1])
    assert set(kinds) <= {"FROM", "RUN", "WORKDIR", "ENV", "COPY", "ENTRYPOINT", "CMD"}
    runs = [args for kind, args in steps if kind == "RUN"]
    apt = next(r for r in runs if "apt-get install" in r)
    assert "apt-get update" in apt and "--no-install-recommends" in apt and "-y" in apt
    assert {"bubblewrap", "make"} <= set(shlex.split(apt)) and "rm -rf /var/lib/apt/lists" in apt
    assert any("pip install -r requirements.txt" in r for r in runs)
    assert any("touch .venv/.installed" in r for r in runs), "make would rebuild the venv"
    workdir = next(args for kind, args in steps if kind == "WORKDIR")
    assert workdir.startswith("/")
    for kind, args in steps:
        if kind == "COPY":
            *sources, _ = shlex.split(args)
            assert all((ROOT / s).exists() for s in sources), args
    assert json.loads(dict(steps)["ENTRYPOINT"]) == ["make"]
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "grades", "release", "autograder"} <= set(ignored)
    assert "check:" in (ROOT / "Makefile").read_text()


# ---------------------------------------------------------------------------------------
# GitHub Classroom and the learner's install.


def test_the_classroom_workflow_runs_each_builds_visible_checks() -> None:
    workflow = yaml.safe_load(classroom_workflow(MANIFEST))
    assert set(workflow["on"]) == {"push", "repository_dispatch"}
    job = workflow["jobs"]["run-autograding-tests"]
    steps = job["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    assert steps[1]["with"]["python-version"] == "3.11"
    assert steps[2]["run"] == "python -m pip install -r requirements.txt"
    graders = [
        s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-command")
    ]
    expected = {
        f"build{e.number}": sum(t.points for t in e.tests if t.visible)
        for e in MANIFEST.graded
        if any(t.visible for t in e.tests)
    }
    assert {s["id"]: s["with"]["max-score"] for s in graders} == expected
    for step in graders:
        number = step["id"].removeprefix("build")
        assert (
            step["with"]["command"]
            == f"python -m pytest -q builds/build{number}/visible/test_visible.py"
        )
        assert (ROOT / "builds" / f"build{number}" / "visible" / "test_visible.py").exists()
    reporter = steps[-1]
    assert reporter["with"]["runners"].split(",") == list(expected)
    for runner in expected:
        assert (
            reporter["env"][f"{runner.upper()}_RESULTS"]
            == f"${{{{steps.{runner}.outputs.result}}}}"
        )


def test_the_learners_requirements_leave_the_instructors_tools_out() -> None:
    full = (ROOT / "requirements.txt").read_text()
    learner = learner_requirements(full)
    names = {
        re.split(r"[=<>\[ ]", ln)[0].lower() for ln in learner.splitlines() if ln[:1].isalpha()
    }
    assert not names & {"playwright", "pytest-xdist", "mypy", "ruff"}
    for kept in ("pytest", "pytest-asyncio", "looptime", "nbval", "hypothesis", "jupyterlab"):
        assert kept in names, kept
    assert learner.splitlines()[-1] == "-e ."
    assert learner_requirements(learner) == learner
    dropped = [ln for ln in full.splitlines() if ln not in learner.splitlines()]
    assert sorted(ln.split("==")[0] for ln in dropped) == [
        "mypy",
        "playwright",
        "pytest-xdist",
        "ruff",
    ]


def test_the_nbgitpuller_link_opens_the_first_notebook() -> None:
    link = nbgitpuller_link("https://hub.example.edu/", "https://github.com/cs101/run-it-twice.git")
    assert link == (
        "https://hub.example.edu/hub/user-redirect/git-pull"
        "?repo=https%3A%2F%2Fgithub.com%2Fcs101%2Frun-it-twice.git"
        "&urlpath=lab%2Ftree%2Frun-it-twice%2Fnotebooks%2F01_retry_with_backoff.ipynb"
        "&branch=main"
    )
    assert (ROOT / "notebooks" / "01_retry_with_backoff.ipynb").exists()
