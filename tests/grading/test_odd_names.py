"""Real classes: long names, odd names, zips, and what a learner leaves behind.

First the escaping on its own (`grader.runtime.escape`), each form checked the way its reader reads
it: CSV through the csv module as a spreadsheet would see the cells, Markdown through a real
renderer (mistune, with GitHub's tables, strikethrough and autolinks). Then one class holding every
such name and leftover, generated here, graded twice in a row: every learner listed, every output
written, the second run byte for byte the first.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.classes.batch import ClassReport, grade_class
from grader.classes.class_command import grade_and_report
from grader.runtime.cleanup import remove_tree
from grader.runtime.escape import NAME_BYTES, code, csv_cell, file_names, markdown, shown
from grader.runtime.forkclient import SCRATCH_ROOT
from grader.runtime.sandbox import Limits
from tests.grading import corpus
from tests.grading.test_bad_input import chain
from tests.unit.workbook.shared.test_export import nbformat3
from workbook.shared.export import cell_source, cell_tags

CHINESE_234 = "学" * 78  # 78 × 3 = 234 bytes of UTF-8
CHINESE_255 = "学" * 85  # a folder name exactly at the 255-byte limit
FORMULAS = ('=HYPERLINK("http:evil","click")', "@SUM(1+1)", "+cmd|' -C calc'!A0", "-2+3")
ESCAPES = ("\x1b[31mred\x1b[0m", "bell\x07", "new\nline", "rtl\u202eabc")
MARKUP = ("<img src=x onerror=alert(1)>", "[click](http:evil)", "*bold*_em_", "`tick`")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


# ───────────────────────────────────────────────────────────────────────── escaping


def test_csv_cells_never_start_a_formula() -> None:
    rows = [[csv_cell(text)] for text in (*FORMULAS, " =1+1", "\t=1", "ann", "learner000")]
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    cells = [row[0] for row in csv.reader(io.StringIO(buffer.getvalue()))]
    assert not [c for c in cells if c.lstrip(" ").startswith(FORMULA_START)]
    assert cells[0] == "'" + FORMULAS[0]  # the id is kept whole behind the quote
    assert cells[-2:] == ["ann", "learner000"]  # plain names unchanged


def test_shown_text_has_no_control_characters() -> None:
    for text in (*ESCAPES, "caf\udce9", "back\\slash"):
        out = shown(text)
        assert out.isprintable() and out.isascii(), out
    assert shown("\x1b[31m") == "\\x1b[31m"
    assert shown("caf\udce9") == "caf\\xe9"  # the byte of a name that is not UTF-8
    assert shown("学生 ann") == "学生 ann"


def render_page(page: str) -> str:
    mistune = pytest.importorskip("mistune")
    # Raw HTML passes, as GitHub and JupyterLab render it (sanitised, but tags stay tags).
    to_html = mistune.create_markdown(escape=False, plugins=["strikethrough", "table", "url"])
    return str(to_html(page))


def render(text: str) -> str:
    return render_page(f"# Feedback for {text}\n\n| a |\n|---|\n| {text} |\n\n- 03: {text}\n")


TAGS = ("<a ", "<img", "<em>", "<strong>", "<code>", "<del>", "<script")


def test_the_renderer_would_show_the_markup_unescaped() -> None:
    """The control: unescaped, these names do become a tag, a link, emphasis and code."""
    for text in MARKUP:
        assert any(tag in render(text) for tag in TAGS), text


@pytest.mark.parametrize("text", [*MARKUP, *ESCAPES, "www.evil.com", "a@b.co", "x #", "&lt;"])
def test_markdown_renders_learner_text_as_written(text: str) -> None:
    rendered = render(markdown(text))
    for tag in TAGS:
        assert tag not in rendered, rendered
    assert rendered.count("<td>") == 1  # a pipe in the text made no second cell
    shown_text = shown(text)
    for line in (ln for ln in rendered.splitlines() if ln.startswith("<h1>")):
        assert html.unescape(re.sub(r"<[^>]+>", "", line)) == f"Feedback for {shown_text}"


@pytest.mark.parametrize(
    "text",
    [
        "ok_solution",
        "learner000",
        "got: PageOutcome(applied=2, unchanged=0, rejected=2, advanced=True, cursor='p1')",
        "9× got: [100, 100]",
        "3× got: 3 requests; from #2: offset 100 #1 at 0 s; offset 200 #1 at 600 s",
        "1× got: HttpStatus, status=201, retry_after=None",
        "03: your answer cells could not run: RuntimeError: half done (in cell 38 (answer))",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert markdown(text) == text
    assert csv_cell(text) == text


def test_code_spans_hold_any_backticks() -> None:
    assert code("exercises/03_x.ipynb") == "`exercises/03_x.ipynb`"
    rendered = render(code("a``b`"))
    assert rendered.count("<code>") == 3  # heading, cell and list item: one span each


def test_file_names_are_bounded_escaped_and_never_shared() -> None:
    ids = [
        "ann",
        "Ann",
        "bob",
        CHINESE_234,
        CHINESE_255,
        CHINESE_255[:-1] + "字",  # the same first 80 bytes: the digest tells them apart
        *FORMULAS,
        *ESCAPES,
        *MARKUP,
        ".dotted",
        "caf\udce9",
        "..",
        "x" * 300,
    ]
    names = file_names(ids)
    assert set(names) == set(ids)
    assert len({n.casefold() for n in names.values()}) == len(ids)  # even folding case
    assert names["bob"] == "bob"  # plain names as they are
    assert names["ann"] != "ann" and names["Ann"] != "Ann"  # would share a file on macOS
    for stem in names.values():
        assert len(stem.encode()) <= NAME_BYTES + 70
        assert re.fullmatch(r"[\w.-]+(~[0-9a-f]{16,64})?", stem), stem
        assert not stem.startswith(".")
    assert file_names(reversed(ids)) == names  # the same names whatever the order


# ─────────────────────────────────────────────────────────────────── a whole class

NAME03 = corpus.NAME
ENTRY07 = corpus.MANIFEST.entry("07")
NAME07 = Path(ENTRY07.path).name
#: An honest build 07 that leaves a folder chain too deep for rmtree in its scratch.
DEEP_SCRATCH = """
import os as _os
_home = _os.getcwd()
for _ in range(1600):
    _os.mkdir("d")
    _os.chdir("d")
_os.chdir(_home)
"""


def with_future(nb: corpus.Notebook) -> corpus.Notebook:
    cell = corpus.answer_cells(nb)[0]
    cell["source"] = "from __future__ import annotations\n\n" + cell_source(cell)
    return nb


def big_outputs(nb: corpus.Notebook) -> corpus.Notebook:
    shown_text = {"output_type": "stream", "name": "stdout", "text": "o" * (17 * 2**20)}
    demo = next(c for c in nb["cells"] if c["cell_type"] == "code" and not cell_tags(c))
    demo["outputs"] = [shown_text]
    return nb


@dataclass
class OddClass:
    submissions: Path
    out: Path
    names: list[str]
    """Every learner the class must list."""
    device: bool


def make_class(base: Path) -> OddClass:
    sub = base / "class"
    sub.mkdir(parents=True)
    solution, exercise = corpus.solution(), corpus.exercise()
    full = [
        "ann",
        "Ann",
        CHINESE_234,
        CHINESE_255,
        *FORMULAS,
        *ESCAPES,
        *MARKUP,
        ".dotted",
        "zipped",
        "future",
        "big_outputs",
        "bom",
        "v3",
        "deep_nest",
    ]
    for name in full:
        corpus.write(sub / name, solution)
    corpus.write(sub / "future", with_future(corpus.solution()))
    corpus.write(sub / "big_outputs", big_outputs(corpus.solution()))
    (sub / "bom" / NAME03).write_bytes(b"\xef\xbb\xbf" + (sub / "bom" / NAME03).read_bytes())
    (sub / "v3" / NAME03).write_text(nbformat3(json.dumps(solution)), encoding="utf-8")
    chain(sub / "deep_nest" / "n", 1100)
    (sub / "zipped.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    (sub / "zip_only.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    corpus.write(sub / "inner_zip", exercise, "notes.txt")
    (sub / "inner_zip" / "work.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    os.mkdir(os.fsencode(sub) + b"/caf\xe9")  # a name that is not UTF-8
    corpus.write(sub / "caf\udce9", exercise)
    (sub / "fifo").mkdir()
    os.mkfifo(sub / "fifo" / NAME03)
    (sub / "linked").mkdir()
    (sub / "linked" / NAME03).symlink_to(corpus.SOLUTION)
    device = True
    (sub / "device").mkdir()
    try:
        os.mknod(sub / "device" / NAME03, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        device = False
        (sub / "device").rmdir()
    scratch = corpus.read(corpus.ROOT / str(ENTRY07.solution))
    cell = corpus.answer_cells(scratch)[-1]
    cell["source"] = cell_source(cell).rstrip() + "\n\n" + DEEP_SCRATCH
    corpus.write(sub / "deep_scratch", scratch, NAME07)
    (sub / "loose.txt").write_text("not a learner")
    names = sorted(
        [*full, "zip_only", "inner_zip", "caf\udce9", "fifo", "linked", "deep_scratch"]
        + (["device"] if device else [])
    )
    return OddClass(sub, base / "grades", names, device)


def csv_rows(out: Path) -> list[list[str]]:
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def outputs(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".cache" not in p.parts
    }


def our_scratch() -> list[str]:
    root = Path(SCRATCH_ROOT or "/tmp")
    return sorted(p.name for p in root.glob(f"rit-{os.getpid()}-grade-*"))


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OddClass, ClassReport]]:
    base = tmp_path_factory.mktemp("odd")
    try:
        odd = make_class(base)
        report = grade_class(
            odd.submissions, odd.out, limits=Limits(load_seconds=10.0), progress=io.StringIO()
        )
        yield odd, report
    finally:  # pytest's own cleanup (rmtree) would die on the deep chain
        assert remove_tree(base).complete


def test_every_learner_is_listed_once_with_their_whole_id(
    graded: tuple[OddClass, ClassReport],
) -> None:
    odd, report = graded
    assert [g.learner for g in report.learners] == odd.names
    rows = csv_rows(odd.out)
    numbers = [e.number for e in report.builds]
    assert rows[0][: len(numbers) + 5] == ["learner", *numbers, "total", "max", "status", "reason"]
    learners = [r[0] for r in rows[1:]]
    assert learners == [csv_cell(n) for n in odd.names]
    for row in rows:
        for cell in row:
            assert not cell.lstrip(" ").startswith(FORMULA_START), cell
            assert cell.isprintable(), cell
    feedback = sorted(p.name for p in (odd.out / "feedback").iterdir())
    assert len(feedback) == len(odd.names)
    assert all(len(name.encode()) <= 255 for name in feedback)


def test_names_and_honest_work_grade_in_full(graded: tuple[OddClass, ClassReport]) -> None:
    _, report = graded
    by_name = {g.learner: g for g in report.learners}
    full = corpus.BUILD03.max_points
    for name in ("ann", "Ann", CHINESE_234, CHINESE_255, *FORMULAS, *ESCAPES, *MARKUP):
        assert by_name[name].builds[0].score == full, (name, by_name[name].reason)
    for name in (".dotted", "zipped", "future", "big_outputs", "bom", "v3", "deep_nest"):
        assert by_name[name].builds[0].score == full, (name, by_name[name].reason)
    assert "deeper than 32 levels" in by_name["deep_nest"].reason
    build07 = next(b for b in by_name["deep_scratch"].builds if b.entry.number == "07")
    assert build07.score == build07.max_score, build07.result.reason
    assert our_scratch() == []  # the 1,600-deep chain went with its scratch folder


def test_what_cannot_be_graded_says_why(graded: tuple[OddClass, ClassReport]) -> None:
    odd, report = graded
    reasons = {g.learner: (g.status, g.reason) for g in report.learners}
    assert reasons["fifo"][0] == "error"
    assert reasons["fifo"][1].startswith(f"03: {NAME03} is a FIFO, not a notebook file: hand in")
    assert reasons["linked"][0] == "error" and "is a symlink" in reasons["linked"][1]
    if odd.device:
        assert "is a device, not a notebook file" in reasons["device"][1]
    assert reasons["zip_only"][0] == "error"
    assert reasons["zip_only"][1].startswith("handed in as a zip (zip_only.zip): unzip it, or")
    assert reasons["inner_zip"][1].startswith("handed in as a zip (work.zip)")
    by_name = {g.learner: g for g in report.learners}
    assert by_name["zipped"].builds[0].status == "graded"  # from the folder; the zip is named
    assert "zipped.zip beside the folder was not read" in reasons["zipped"][1]
    summary = (odd.out / "summary.md").read_text(encoding="utf-8")
    for words in ("zip_only.zip", "zipped.zip", "work.zip", "loose.txt", "caf\\\\xe9"):
        assert words in summary, words
    assert summary.isprintable() or all(ln.isprintable() for ln in summary.splitlines())
    for path in [odd.out / "summary.md", *(odd.out / "feedback").iterdir()]:
        # The lines that carry learners' names, paths and reasons (the rest is ours).
        theirs = [
            ln
            for ln in path.read_text(encoding="utf-8").splitlines()
            if ln.startswith(("# Feedback for", "- ", "**"))
        ]
        rendered = render_page("\n\n".join(theirs))
        for tag in ("<a ", "<img", "<em>", "<del>", "<script"):
            assert tag not in rendered, (path.name, tag)


def test_grading_again_rewrites_the_same_bytes(graded: tuple[OddClass, ClassReport]) -> None:
    odd, _ = graded
    before = outputs(odd.out)
    said: list[str] = []
    assert grade_and_report(odd.submissions, odd.out, stdout=said.append) == 0
    assert outputs(odd.out) == before
    assert all(line.isprintable() for line in said), said
    assert any("need a look" in line for line in said)
    assert our_scratch() == []


def test_each_feedback_file_is_one_learners(graded: tuple[OddClass, ClassReport]) -> None:
    odd, _ = graded
    titles = {
        path.read_text(encoding="utf-8").splitlines()[0]
        for path in (odd.out / "feedback").iterdir()
    }
    assert titles == {f"# Feedback for {markdown(name)}" for name in odd.names}
    assert not [t for t in titles if not t.isprintable()]
