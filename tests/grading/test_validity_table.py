"""Validity's table is the workbook's own verdict on itself: a re-layout must not change it.

``python -m grader.validity`` runs here and its table, from the first build on, is compared
with ``fixtures/validity_table.txt`` line by line, after three normalisations: times (they
vary), the repository's path (it moves), and which graded tests kill each known bug ("killed
by ..." becomes "killed"). The last because those lists depend on the seeded inputs, whose
salt is each probes file's text (a moved import redraws them), and one varies from run to
run; whether each bug is killed, every other line and every count must stay exactly the same.
After an intended change of the table, regenerate the fixture:
``python -m grader.validity | python -m tests.grading.test_validity_table > FIXTURE``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "validity_table.txt"
pytestmark = pytest.mark.slow


def normalised(output: str, root: Path = ROOT) -> str:
    """The table from its first build on, with times, the root and killer lists normalised."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("build "))
    text = "\n".join(lines[start:]).replace(str(root), "<root>")
    text = re.sub(r"\d+(\.\d+)? (s|ms)\b", "T \\2", text)
    text = re.sub(r"killed by .*$", "killed", text, flags=re.MULTILINE)
    return text.rstrip() + "\n"


def test_the_table_is_what_it_was() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "grader.validity"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert normalised(done.stdout).splitlines() == FIXTURE.read_text("utf-8").splitlines()


if __name__ == "__main__":
    sys.stdout.write(normalised(sys.stdin.read()))
