"""`grader.exports.classroom`: the learner's requirements, the GitHub Classroom workflow made
from the manifest, and the nbgitpuller link."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from grader.exports.classroom import (
    LEARNER_NOTE,
    classroom_workflow,
    learner_requirements,
    nbgitpuller_link,
)
from workbook.shared.manifest import load_manifest

REQUIREMENTS = """# pinned
# for everyone
httpx==0.27
pytest-xdist==3.5  # parallel
Ruff>=0.4
pytest_playwright
mypy
-e .
"""


def test_the_instructors_tools_are_left_out_with_a_note() -> None:
    text = learner_requirements(REQUIREMENTS)
    assert text.splitlines() == ["# pinned", "# for everyone", LEARNER_NOTE, "httpx==0.27", "-e ."]


def test_cutting_the_requirements_twice_changes_nothing() -> None:
    once = learner_requirements(REQUIREMENTS)
    assert learner_requirements(once) == once
    assert learner_requirements("") == LEARNER_NOTE + "\n"


def test_the_workflow_has_one_step_per_build_worth_its_visible_points() -> None:
    manifest = load_manifest()
    text = classroom_workflow(manifest)
    assert text.startswith("# GitHub Classroom autograding")
    expected = {
        e.number: sum(t.points for t in e.tests if t.visible)
        for e in manifest.graded
        if any(t.visible for t in e.tests)
    }
    assert expected
    for number, points in expected.items():
        step = text.split(f"        id: build{number}\n", 1)[1].split("      - name:", 1)[0]
        assert f"builds/build{number}/visible/test_visible.py" in step
        assert f"max-score: {points}\n" in step
    runners = ",".join(f"build{n}" for n in expected)
    assert f"          runners: {runners}\n" in text
    assert classroom_workflow() == text  # the repo's manifest by default


def test_the_link_opens_the_first_notebook_of_the_cloned_folder() -> None:
    url = nbgitpuller_link("https://hub.example.org/", "https://github.com/o/run-it-twice.git")
    parts = urlsplit(url)
    assert parts.netloc == "hub.example.org"
    assert parts.path == "/hub/user-redirect/git-pull"
    assert parse_qs(parts.query) == {
        "repo": ["https://github.com/o/run-it-twice.git"],
        "urlpath": ["lab/tree/run-it-twice/notebooks/01_retry_with_backoff.ipynb"],
        "branch": ["main"],
    }
    other = nbgitpuller_link("https://h", "https://g/o/r/", branch="dev", notebook="x.ipynb")
    assert "urlpath=lab%2Ftree%2Fr%2Fx.ipynb" in other and "branch=dev" in other
