"""Submissions that break things, cheat or forge, built from the build 03 (and 07) notebooks.

Every learner here is a folder written by `write_corpus`, made by editing the solution's (or
the exercise's) answer cells: appending code after a definition redefines it, so each entry
changes exactly what it says. Entries come in pairs where honesty is measured: a cheat and its
*twin*, the same code with the lie taken out (the plain value a lying object pretends to be;
for hard-coded answers, the stub). A cheat must never score above its twin. Cheats that start
from the stubs must score zero. Building the corpus twice gives the same files.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import Runner, load_suite
from workbook.shared.export import cell_source, cell_tags, export_source
from workbook.shared.manifest import load_manifest

Notebook = dict[str, Any]
MANIFEST = load_manifest()
ROOT = MANIFEST.root
BUILD03 = MANIFEST.entry("03")
SOLUTION = ROOT / str(BUILD03.solution)
EXERCISE = ROOT / BUILD03.path
NAME = Path(BUILD03.path).name


def read(path: Path) -> Notebook:
    data: Notebook = json.loads(path.read_text(encoding="utf-8"))
    return data


def answer_cells(nb: Notebook) -> list[dict[str, Any]]:
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "answer" in cell_tags(c)]


def append_after(nb: Notebook, name: str, code: str) -> Notebook:
    """A copy of `nb` whose answer cell defining `name` ends with `code` (which may redefine it)."""
    nb = copy.deepcopy(nb)
    for cell in answer_cells(nb):
        text = cell_source(cell)
        if f"def {name}(" in text or f"class {name}" in text:
            cell["source"] = text.rstrip() + "\n\n\n" + textwrap.dedent(code).strip() + "\n"
            return nb
    raise LookupError(f"no answer cell defines {name}")


def at_load(nb: Notebook, code: str) -> Notebook:
    """A copy of `nb` whose first answer cell starts with `code` (it runs when the answers load)."""
    nb = copy.deepcopy(nb)
    cell = answer_cells(nb)[0]
    cell["source"] = textwrap.dedent(code).strip() + "\n\n" + cell_source(cell)
    return nb


def at_end(nb: Notebook, code: str) -> Notebook:
    """A copy of `nb` whose last answer cell ends with `code` (it overrides every answer)."""
    nb = copy.deepcopy(nb)
    cell = answer_cells(nb)[-1]
    cell["source"] = cell_source(cell).rstrip() + "\n\n\n" + textwrap.dedent(code).strip() + "\n"
    return nb


def stubbed(nb: Notebook, *names: str) -> Notebook:
    """The honest twin: `names` redefined to raise NotImplementedError, like the stubs."""
    for name in names:
        nb = append_after(
            nb, name, f"def {name}(*args, **kwargs):\n    raise NotImplementedError('{name}')\n"
        )
    return nb


def write(folder: Path, nb: Notebook | str, name: str = NAME) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    text = nb if isinstance(nb, str) else json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


@dataclass(frozen=True)
class Learner:
    """One corpus folder: how to write it, and what its grade for `build` (03 unless said)
    must show."""

    name: str
    make: Callable[[Path], object]
    points: int | None = None
    """Exactly this many points for the build (None: see `twin`)."""
    status: str | None = None
    words: tuple[str, ...] = ()
    """Each appears in the build's reason or in a failed test's message."""
    twin: str | None = None
    """A cheat scores at most what this honest learner scores."""
    build: str = "03"
    fails: tuple[str, ...] = ()
    """Graded tests the cheat must fail, whatever else it earns."""


def solution() -> Notebook:
    return read(SOLUTION)


def exercise() -> Notebook:
    return read(EXERCISE)


# ─────────────────────────────────────────────────────────── broken, and honest but noisy

NOISY = """
import logging
import sys
import warnings

_quiet_fnv = fnv1a_64


def fnv1a_64(data):
    print(f"debug: hashing {len(data)} bytes", file=sys.stderr)
    warnings.warn("a learner's warning")
    logging.getLogger("learner").warning("still noisy")
    return _quiet_fnv(data)


print("x" * 200_000, file=sys.stderr)
"""

FLOOD_PRINT = """
import sys

for _ in range(1024):  # a gibibyte through print: kept up to the cap, the rest dropped
    sys.stdout.write("y" * 2**20)
"""

FLOOD_FD = """
import os

for _ in range(2048):  # two gibibytes straight to the descriptor: the file-size limit stops it
    os.write(1, b"z" * 2**20)
"""

FORK_BOMB = """
import os

while True:
    try:
        os.fork()
    except OSError:
        pass
"""

#: Aims at the class's submissions and the grading outputs (both in a temporary folder here),
#: its own source and scratch folder, and tries to leave a file in the repository.
DELETES = """
import os
import shutil
from pathlib import Path

import workbook.shared.manifest

for _target in (Path(@SUBMISSIONS@), Path(@OUT@), Path.cwd().parent):
    shutil.rmtree(_target, ignore_errors=True)
try:
    os.remove(__file__)
except OSError:
    pass
try:
    (workbook.shared.manifest.repo_root() / @PLANTED@).write_text("a learner was here")
except OSError:
    pass
"""

KILL_SERVER = """
import os
import signal

for _kill in (lambda: os.kill(os.getppid(), signal.SIGKILL),
              lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)):
    try:
        _kill()
    except OSError:
        pass
"""


#: Where the corpus is being written (set by `write_corpus`; the deleting learner aims there).
PLACES: dict[str, str] = {}
PLANTED = "planted-by-a-learner.txt"


def fill(code: str) -> str:
    for marker, value in (*PLACES.items(), ("PLANTED", PLANTED)):
        code = code.replace(f"@{marker}@", repr(value))
    return code


def whole_copy(folder: Path) -> None:
    """A learner's whole copy: the solved build in exercises/, stubs in .pristine/ and a
    backup, a concept notebook and a checkpoint that must all be ignored."""
    write(folder / "exercises", solution())
    write(folder / ".pristine" / "exercises", exercise())
    write(folder / "exercises" / ".backups", exercise(), NAME.replace(".ipynb", ".1.ipynb"))
    write(folder / "exercises" / ".ipynb_checkpoints", exercise())
    write(folder / "notebooks", {"cells": [], "metadata": {}, "nbformat": 4}, "02_x.ipynb")


def symlinked(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NAME).symlink_to(SOLUTION)


def two_notebooks(folder: Path) -> None:
    write(folder, solution(), "03_mine.ipynb")
    write(folder, exercise(), "03_other.ipynb")


def huge(folder: Path) -> None:
    nb = solution()
    # 17 MiB in a graded cell: stored outputs and prose do not count against the limit.
    code = {"cell_type": "code", "metadata": {"tags": ["answer"]}, "outputs": []}
    nb["cells"].append({**code, "execution_count": None, "source": "#" + "w" * (17 * 2**20)})
    write(folder, nb)


def no_answer(folder: Path) -> None:
    nb = solution()
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        cell.setdefault("metadata", {})["tags"] = [t for t in tags if t != "answer"]
    write(folder, nb)


def nb_maker(build: Callable[[], Notebook]) -> Callable[[Path], object]:
    return lambda folder: write(folder, build())


FULL = BUILD03.max_points
ROBUST: tuple[Learner, ...] = (
    Learner("ok_solution", nb_maker(solution), FULL, status="graded"),
    Learner("ok_stub", nb_maker(exercise), 0, status="graded"),
    Learner("ok_whole_copy", whole_copy, FULL, status="graded"),
    Learner("ok_noisy_stderr", nb_maker(lambda: append_after(solution(), "fnv1a_64", NOISY)), FULL),
    Learner("ok_flood_print", nb_maker(lambda: at_load(solution(), FLOOD_PRINT)), FULL),
    Learner("ok_deletes_files", nb_maker(lambda: at_load(solution(), fill(DELETES))), FULL),
    Learner("ok_kills_the_server", nb_maker(lambda: at_load(solution(), KILL_SERVER)), FULL),
    Learner(
        "hang_at_load",
        nb_maker(lambda: at_load(solution(), "while True:\n    pass")),
        0,
        "error",
        ("did not finish running",),
    ),
    Learner(
        "hang_in_fnv",
        nb_maker(
            lambda: append_after(
                solution(), "fnv1a_64", "def fnv1a_64(data):\n    while True:\n        pass"
            )
        ),
        FULL - BUILD03.test("fnv1a_vectors").points,
        "partial",
        ("timed out",),
    ),
    Learner(
        "hang_swallowing_the_alarm",
        nb_maker(
            lambda: append_after(
                solution(),
                "fnv1a_64",
                """
                def fnv1a_64(data):
                    while True:
                        try:
                            while True:
                                pass
                        except BaseException:
                            pass
                """,
            )
        ),
        FULL - BUILD03.test("fnv1a_vectors").points,
        "partial",
        ("timed out",),
    ),
    Learner(
        "abort_at_load",
        nb_maker(lambda: at_load(solution(), "import os\nos.abort()")),
        0,
        "error",
        ("aborted",),
    ),
    Learner(
        "segfault_in_fnv",
        nb_maker(
            lambda: append_after(
                solution(),
                "fnv1a_64",
                "import ctypes\n\ndef fnv1a_64(data):\n    return ctypes.string_at(0)",
            )
        ),
        FULL - BUILD03.test("fnv1a_vectors").points,
        "partial",
        ("segmentation fault",),
    ),
    Learner(
        "sys_exit_at_load",
        nb_maker(lambda: at_load(solution(), "import sys\nsys.exit(0)")),
        0,
        "error",
        ("SystemExit",),
    ),
    Learner(
        "os_exit_at_load",
        nb_maker(lambda: at_load(solution(), "import os\nos._exit(3)")),
        0,
        "error",
        ("exited with code 3",),
    ),
    Learner(
        "memory_at_load",
        nb_maker(lambda: at_load(solution(), "hoard = [bytearray(2**26) for _ in range(4096)]")),
        0,
        "error",
        ("MemoryError",),
    ),
    Learner("fork_bomb_at_load", nb_maker(lambda: at_load(solution(), FORK_BOMB)), 0, "error"),
    Learner(
        "flood_fd_at_load",
        nb_maker(lambda: at_load(solution(), FLOOD_FD)),
        0,
        "error",
        ("File too large",),
    ),
    Learner("not_json", lambda f: write(f, "{oops"), 0, "error", ("invalid JSON",)),
    Learner("no_answer_cell", no_answer, 0, "error", ("no cell tagged 'answer'",)),
    Learner(
        "syntax_error",
        nb_maker(lambda: append_after(solution(), "content_id", "def broken(:\n    pass")),
        0,
        "error",
        ("SyntaxError", "(answer"),
    ),
    Learner("not_submitted", lambda f: f.mkdir(parents=True), 0, "not submitted"),
    Learner("symlink_to_solution", symlinked, 0, "error", ("symlink",)),
    Learner("two_notebooks", two_notebooks, 0, "error", ("2 notebooks for build 03",)),
    Learner("huge_notebook", huge, 0, "error", ("too large",)),
)

# ─────────────────────────────────────────────────────────────────────────────── cheats

ALWAYS_EQUAL = """
class _Yes:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0

    def __len__(self):
        return 16


def fnv1a_64(data):
    return _Yes()


def content_id(kind, canonical):
    return _Yes()
"""

LYING_STR = """
class _Hex(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def content_id(kind, canonical):
    return _Hex("0" * 64)
"""

LYING_FLOAT = """
class _Seconds(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __lt__(self, other):
        return False

    def __gt__(self, other):
        return False

    __le__ = __ge__ = __eq__
    __hash__ = float.__hash__


def backoff_delay(policy, attempt, rng=None):
    return _Seconds(0.0)
"""

PATCH_GRADER = """
import gc
import sys

try:
    import pytest
    pytest.approx = lambda *args, **kwargs: True
    import _pytest.assertion.rewrite as _rewrite
    _rewrite.AssertionRewritingHook = object
except Exception:
    pass

import unittest
unittest.TestCase.assertEqual = lambda *args, **kwargs: None

import grader.suites.judging as _judging
import grader.suites.observe as _observe
_judging.same_value = lambda *args, **kwargs: True
_judging.verdict = lambda *args, **kwargs: None
_judging.equal = lambda *args, **kwargs: None


def _fake_attempt(fn):
    return {"ok": True}


_observe.attempt = _fake_attempt
_observe.plain = lambda value, depth=0: True
for _namespace in gc.get_objects():  # the probes' own globals, wherever they are
    if isinstance(_namespace, dict) and "PROBES" in _namespace and "attempt" in _namespace:
        _namespace["attempt"] = _fake_attempt
        _namespace["plain"] = lambda value, depth=0: True
for _module in list(sys.modules.values()):
    if getattr(_module, "__name__", "").startswith("_hidden"):
        _module.attempt = _fake_attempt
"""

READ_HIDDEN = """
import os
import sys

import workbook.shared.manifest

_repo = workbook.shared.manifest.repo_root()
_seen = []
_hidden = _repo / "builds/build03/hidden"
# The listings first, by folder name: the whole answer must fit the 200 characters shown.
for _folder in (_repo / "builds/build03", _hidden, _repo / "solutions"):
    try:
        _seen.append(f"{_folder.name}: {sorted(os.listdir(_folder))}")
    except OSError as _exc:
        _seen.append(f"{_folder.name}: {type(_exc).__name__}")
_solution = _repo / "solutions/03_build_retry_and_sink.ipynb"
_unread = []
for _path in (_hidden / "mutants.toml", _hidden / "probes.py", _solution, _repo / ".git/HEAD"):
    try:
        _text = _path.read_text()
        print(_text)
        print(_text, file=sys.stderr)
        _seen.append(_text[:3000])
    except OSError:
        _unread.append(_path.name)
_seen.append("unread: " + " ".join(_unread))

def fnv1a_64(data):
    return " | ".join(_seen)
"""

FAKE_RESULTS = """
import json
import os
from pathlib import Path

_report = "learner,03,total,max,status,reason\\ncheat_fake_results,49,49,49,graded,\\n"
for _out in (Path("grades"), Path(@OUT@), Path.cwd().parent):
    for _name in ("grades.csv", "feedback/cheat_fake_results.md", ".cache/grades/00/x.json"):
        try:
            (_out / _name).parent.mkdir(parents=True, exist_ok=True)
            (_out / _name).write_text(_report)
        except OSError:
            pass
_forged = "".join(
    json.dumps({"event": kind, "probe": None, "obs": {"ok": True}}) + "\\n"
    for kind in ("loaded", "done", "end")
)
for _fd in range(3, 64):
    try:
        os.write(_fd, _forged.encode())
    except OSError:
        pass
print("================ 31 passed in 0.42s ================")
print('{"event": "end"}')
print("49/49 points: all tests passed")
"""

FAKE_ALL_PASSED = """
import sys

print("✓ all 31 graded tests passed (49/49)")
print("PASSED fnv1a_vectors\\nPASSED honors_retry_after", file=sys.stderr)
"""

HARDCODED = """
_VISIBLE = {b"": "cbf29ce484222325", b"a": "af63dc4c8601ec8c", b"foobar": "85944171f73967e8"}


def fnv1a_64(data):
    return _VISIBLE.get(bytes(data), "0" * 16)
"""


def cheat(code: str) -> Callable[[Path], object]:
    """The solution with `code` at the end of its answers (redefining what it cheats on)."""
    return nb_maker(lambda: at_end(solution(), code))


def twin(*names: str) -> Callable[[Path], object]:
    return nb_maker(lambda: stubbed(solution(), *names))


CHEATS: tuple[Learner, ...] = (
    Learner("cheat_always_equal", cheat(ALWAYS_EQUAL), twin="twin_always_equal"),
    Learner(
        "twin_always_equal",
        cheat(
            'def fnv1a_64(data):\n    return ""\n\ndef content_id(kind, canonical):\n    return ""'
        ),
    ),
    Learner("cheat_lying_str", cheat(LYING_STR), twin="twin_lying_str"),
    Learner("twin_lying_str", cheat('def content_id(kind, canonical):\n    return "0" * 64')),
    Learner("cheat_lying_float", cheat(LYING_FLOAT), twin="twin_lying_float"),
    Learner(
        "twin_lying_float", cheat("def backoff_delay(policy, attempt, rng=None):\n    return 0.0")
    ),
    Learner("cheat_patches_grader", nb_maker(lambda: at_load(exercise(), PATCH_GRADER)), 0),
    Learner("cheat_reads_hidden", nb_maker(lambda: at_end(exercise(), READ_HIDDEN)), 0),
    Learner("cheat_fake_results", nb_maker(lambda: at_load(exercise(), fill(FAKE_RESULTS))), 0),
    Learner("cheat_prints_all_passed", nb_maker(lambda: at_load(exercise(), FAKE_ALL_PASSED)), 0),
    Learner("cheat_hardcodes_visible", cheat(HARDCODED), twin="twin_hardcodes"),
    Learner("twin_hardcodes", twin("fnv1a_64")),
)

# ─────────────────────────────────────────────────────────────────────────────── forgeries
#
# One per way the learner's code can try to speak for the grader from inside its own process
# (probes run there, beside it). Each is held to the score of the same work without the
# forgery: the stub's zero, or its twin's. Those that replay use the solution's own
# observations, recorded once per corpus (`recorded`), with the seed tag of every seeded
# observation rewritten for the forger's own text: the strongest replay there is, short of
# doing the work.

_RECORDED: dict[str, dict[str, Any]] = {}
_ARTEFACTS: dict[str, Path] = {}
_LEDGERS: dict[str, dict[str, tuple[tuple[str, float, Any], ...]]] = {}


def recorded(build: str) -> dict[str, Any]:
    """What the probes observe of build `build`'s solution, by probe (``name@2`` for the
    second interpreter): the observations a forgery replays."""
    _record(build)
    return _RECORDED[build]


def recorded_artefacts(build: str) -> Path:
    """The files the runner copied out of that same run (kept stores and JSONL files)."""
    _record(build)
    return _ARTEFACTS[build]


def recorded_ledgers(build: str) -> dict[str, tuple[tuple[str, float, Any], ...]]:
    """The ticks each probe of the solution wrote (`grader.classes.ledger`): what a forger that
    writes ticks of its own would replay with the observations."""
    _record(build)
    return _LEDGERS[build]


def _record(build: str) -> None:
    if build in _RECORDED:
        return
    entry = MANIFEST.entry(build)
    with Runner() as runner:
        run = runner.run_probes(export_source(ROOT / str(entry.solution)), load_suite(build))
        _RECORDED[build] = {k: r.obs for k, r in run.records.items() if r.status == "done"}
        _LEDGERS[build] = {k: r.ledger for k, r in run.records.items() if r.status == "done"}
        kept = Path(tempfile.mkdtemp(prefix=f"rit-recorded-{build}-"))
        if run.artefacts is not None:
            shutil.copytree(run.artefacts, kept, dirs_exist_ok=True)
        _ARTEFACTS[build] = kept
        runner.discard(run)


#: What every replaying forgery starts with: the recorded observations, and how to make one
#: look like an observation of this very submission's inputs.
REPLAY = """
import gc
import json
import linecache
import sys

from grader.suites.observe import inputs_seed, tag_of

_RECORDED = json.loads(@RECORDED@)
_SOURCE = "".join(linecache.cache[__file__][2])
if hasattr(gc, "unfreeze"):
    gc.unfreeze()  # the fork server froze what it imported: the probes too
_SALT = next(  # the salt of this build's probes (the server holds every build's)
    o.salt
    for o in gc.get_objects()
    if type(o).__name__ == "Probes" and "fnv1a_vectors" in getattr(o, "by_name", {})
)
_SECOND = any(
    k.endswith("@2") and isinstance(v, dict) and v.get("hash") == hash("run-it-twice")
    for k, v in _RECORDED.items()
)


def _replayed(name):
    obs = json.loads(json.dumps(_RECORDED.get(name + ("@2" if _SECOND else ""), {"ok": None})))
    if isinstance(obs, dict) and "seed" in obs:
        obs["seed"] = tag_of(inputs_seed(_SOURCE, _SALT, name))
    return obs


def _is_chosen(value):
    return (
        isinstance(value, list)
        and value
        and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in value)
    )


def _replace(chosen, make):
    for index, (name, _fn) in enumerate(chosen):
        chosen[index] = (name, make(name))
"""

#: Walks up from the answers' own code to the worker's frame and swaps every probe it is about
#: to run for one that returns the replayed observation.
FRAME_WALK = """
_frame = sys._getframe()
while _frame is not None:
    for _value in list(_frame.f_locals.values()):
        if _is_chosen(_value):
            _replace(_value, lambda name: (lambda ns: _replayed(name)))
    _frame = _frame.f_back
"""

#: The same through the collector: every object the worker holds, frozen ones included.
THROUGH_GC = """
for _value in gc.get_objects():
    if _is_chosen(_value):
        _replace(_value, lambda name: (lambda ns: _replayed(name)))
"""

#: Writes a complete, well-formed result stream (loaded, each probe's start and report, end)
#: on the results pipe, then ends the process before the real one begins.
FORGED_STREAM = """
import os

_chosen, _channel = None, None
_frame = sys._getframe()
while _frame is not None:
    for _value in list(_frame.f_locals.values()):
        if _is_chosen(_value):
            _chosen = _value
        if hasattr(_value, "fd") and hasattr(_value, "send"):
            _channel = _value
    _frame = _frame.f_back


def _line(event):
    data = (json.dumps(event, separators=(",", ":")) + "\\n").encode()
    while data:
        data = data[os.write(_channel.fd, data):]


if _chosen is not None and _channel is not None:
    _line({"event": "loaded", "seconds": 0.01, "setup": 0.01})
    for _name, _fn in _chosen:
        _line({"event": "start", "probe": _name})
        _line({"event": "done", "probe": _name, "obs": _replayed(_name), "seconds": 0.01})
    _line({"event": "end"})
    os._exit(0)
"""

#: The jitter probes swapped for ones that report no draws at all (and the seed tag right).
EMPTY_DRAWS = """
_EMPTY = {
    "full_jitter_stays_within_bounds": lambda: {
        "draws": [{"ok": []} for _ in range(9)],
        "five": [{"ok": []}, {"ok": []}],
        "plain": {"ok": [0.8]},
    },
    "full_jitter_spreads_over_the_whole_range": lambda: {
        "draws": [{"ok": []} for _ in range(6)],
        "with_retry": _replayed("full_jitter_spreads_over_the_whole_range")["with_retry"],
    },
}


def _empty(name):
    if name not in _EMPTY:
        return None
    return lambda ns: {**_EMPTY[name](), "seed": tag_of(inputs_seed(_SOURCE, _SALT, name))}


_frame = sys._getframe()
while _frame is not None:
    for _value in list(_frame.f_locals.values()):
        if _is_chosen(_value):
            for _index, (_name, _fn) in enumerate(_value):
                if _empty(_name) is not None:
                    _value[_index] = (_name, _empty(_name))
    _frame = _frame.f_back
"""

#: Digests that are stable, distinct and the same in every process, and are not content ids:
#: everything a judge comparing keys only with each other would accept.
CONSISTENT_DIGESTS = """
import hashlib


def content_id(kind, canonical):
    return hashlib.sha256(f"{kind}|{canonical}".encode()).hexdigest()


def content_key(row):
    return hashlib.sha256(repr(row).encode()).hexdigest()
"""

#: Raises a ParseError of its own making, a look-alike of etl.ParseError.
LOCAL_PARSE_ERROR = """
import dataclasses
import json


class @NAME@(ValueError):
    pass


def content_key(row):
    try:
        canonical = json.dumps(
            dataclasses.asdict(row),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except ValueError as exc:
        raise @NAME@(str(exc)) from None
    return content_id("row", canonical)
"""

#: Rebinds etl's error kinds (where a probe might look them up) to the error it raises.
REBINDS_ETL = """
import etl
import etl.errors

etl.ParseError = ValueError
etl.errors.ParseError = ValueError
"""

#: Tries every way to the reference seams of build 03, to run them as its own answers.
READS_SEAMS = """
from pathlib import Path

import workbook
from workbook import siblings

_places = [siblings.reference_for("03"), *siblings.references().values()]
_places += [Path(workbook.__file__).resolve().parents[1] / "builds/build03/hidden/seams.py"]
_places += [Path("/builds/build03/hidden/seams.py"), Path("/scratch/reference/03.py")]
for _place in _places:
    try:
        exec(compile(Path(_place).read_text(), "seams", "exec"), globals())
        break
    except Exception:
        pass
try:
    globals().update(vars(siblings.load_sibling("03")))
except Exception:
    pass
"""

#: A connection whose trace shows a deferred BEGIN as BEGIN IMMEDIATE (with the known bug
#: that writes BEGIN): a probe tracing through the connection's own method would believe it.
LYING_CONNECTION = """
import sqlite3 as _sqlite3


class _Lying(_sqlite3.Connection):
    def set_trace_callback(self, callback):
        if callback is None:
            return super().set_trace_callback(None)

        def rewritten(sql):
            callback("BEGIN IMMEDIATE" if sql.strip().upper() == "BEGIN" else sql)

        return super().set_trace_callback(rewritten)


_honest_open_store = open_store


def open_store(path):
    _honest_open_store(path).close()  # the tables, made as before
    return _sqlite3.connect(path, isolation_level=None, factory=_Lying)
"""

BUILD07 = MANIFEST.entry("07")

# ── forgeries of time (issue 25): each lies to a probe about how long something took ──────
#
# Every with_retry below is the solution's, with its wait done some other way: `@WAIT@` takes
# the seconds. Their twins wait the same way without the lie (no wait at all, or the same
# extra wait): a forgery must score no more.

RETRY = """
import asyncio
import builtins
import time

builtins._fake_now = 0.0


async def with_retry(policy, op):
    attempt = 1
    while True:
        try:
            return await op()
        except EtlError as err:
            if not err.is_transient() or attempt >= policy.max_attempts:
                @LAST@
                raise
            wait = err.retry_after()
            delay = backoff_delay(policy, attempt) if wait is None else wait
            @WAIT@
        attempt += 1
"""


def retry(wait: str, last: str = "pass", extra: str = "") -> str:
    return RETRY.replace("@WAIT@", wait).replace("@LAST@", last) + extra


#: Rewinds looptime's clock (an int of microseconds, name-mangled) to `saved`.
_REWIND = "asyncio.get_running_loop()._LoopTimeEventLoop__now = saved"
#: Moves it forward by `delay` without a timer: what a wait looks like on the clock alone.
_SKIP = (
    "loop = asyncio.get_running_loop(); "
    "loop._LoopTimeEventLoop__now += loop._LoopTimeEventLoop__time2int(delay)"
)
#: One more wait after the last failure, then the clock wound back over it.
EXTRA_WAIT_REWOUND = (
    "saved = asyncio.get_running_loop()._LoopTimeEventLoop__now;"
    " await asyncio.sleep(backoff_delay(policy, attempt)); " + _REWIND
)
EXTRA_WAIT = "await asyncio.sleep(backoff_delay(policy, attempt))"
#: No wait: the seconds go on a clock of the forger's own, which the lies below read.
FAKE_WAIT = "builtins._fake_now += delay"
SLEEP_SKIPS = """

async def _skipping_sleep(delay, result=None):
    loop = asyncio.get_running_loop()
    loop._LoopTimeEventLoop__now += loop._LoopTimeEventLoop__time2int(delay)
    return result


asyncio.sleep = _skipping_sleep
"""
SLEEP_NOOP = """

async def _no_sleep(delay, result=None):
    return result


asyncio.sleep = _no_sleep
"""
#: The probes' timer (the loop clock's reader) replaced, then rewritten in place.
TIMER_REPLACED = """

import workbook.vtime

workbook.vtime.Clock.now = lambda self: round(builtins._fake_now, 6)
"""
CODE_SWAPPED = """

import workbook.vtime


def _now(self):
    import builtins

    return round(builtins._fake_now, 6)


workbook.vtime.Clock.now.__code__ = _now.__code__
"""
#: The hidden probes' module, found through gc, and its op fixture's call replaced.
_PROBES_OF = """

import gc


def _probes_with(name):
    gc.unfreeze()
    for found in gc.get_objects():
        if type(found) is dict and str(found.get("__name__", "")).startswith("_hidden_"):
            if name in found:
                return found
    return {}
"""
FIXTURE_REPLACED = (
    _PROBES_OF
    + """

_Script = _probes_with("Script").get("Script")
if _Script is not None:
    _play = _Script._play

    async def _stamped(self):
        stamp = len(self.times)
        try:
            return await _play(self)
        finally:  # the stamp the probe took becomes the forger's clock
            self.times[stamp] = round(builtins._fake_now, 6)

    _Script._play = _stamped
"""
)
#: A blocking wait, its record wiped from the probes' list and the clock moved over it.
BLOCKING_HIDDEN = (
    "time.sleep(delay); import grader.suites.observe as _o; _o._blocking.clear(); " + _SKIP
)
#: A sink without its lock (the known bug), and the probes' own inner sink's record of what
#: it was given deduplicated after every load (the old probes reported those lists).
SINK_RECORD_EDITED = (
    _PROBES_OF
    + """

_Counting = _probes_with("CountingSink").get("CountingSink")
if _Counting is not None:
    _counting_load = _Counting.load

    async def _deduplicated(self, rows):
        try:
            return await _counting_load(self, rows)
        finally:
            for name in ("written", "loads"):
                kept = getattr(self, name, None)
                if isinstance(kept, list):
                    once = []
                    for item in kept:
                        if item not in once:
                            once.append(item)
                    kept[:] = once

    _Counting.load = _deduplicated
"""
)
TIME_TESTS = (
    "retries_transient_then_succeeds",
    "honors_retry_after",
    "n_attempts_sleep_n_minus_1_times",
    "matches_tenacity_on_scripted_failures",
)

# Build 05: a collect-everything ingest (the known bug), with the line count a probe takes of
# its file made to look like a streaming one's.
BUILD05 = MANIFEST.entry("05")
STREAMING_LOOK = """

import pathlib
import sys

_real_read_bytes = pathlib.Path.read_bytes
_asked = [0]


def _read_bytes(self):
    if sys._getframe(1).f_code.co_name == "file_state":
        _asked[0] += 1
        return b"x\\n" * (10 * (_asked[0] - 1))
    return _real_read_bytes(self)


pathlib.Path.read_bytes = _read_bytes
"""
LINES_REBOUND = (
    _PROBES_OF
    + """

import hashlib

_asked = [0]


def _file_state(path):
    _asked[0] += 1
    shown = b"x\\n" * (10 * (_asked[0] - 1))
    return [len(shown), hashlib.sha256(shown).hexdigest()]


_probes_with("Recorder")["file_state"] = _file_state
"""
)


def wrap_pages(setup: str, before: str, each: str) -> str:
    """A source whose pages pass through code of the forger's: `setup` at load, `before` when
    the pages start (in `_pages`, with `self` the source), `each` for every `page`."""
    return f"""

{setup}

_real_pages = SpaceDevsSource.pages


def _pages(self):
{textwrap.indent(before or "pass", "    ")}

    async def gen():
        async for page in _real_pages(self):
{textwrap.indent(each, " " * 12)}
            yield page

    return gen()


SpaceDevsSource.pages = _pages
"""


#: A review's attacks (issue 25): an `end` tick written early, so the extra wait after it
#: fell outside the run; a real timer awaited after moving the clock over it, so the select
#: gained nothing; blank lines written as the pages came; a decoy file watched instead.
END_EARLY = "import grader.suites.observe as _o; _o.tick('end'); " + EXTRA_WAIT
MOVED_OVER_A_TIMER = (
    "loop = asyncio.get_running_loop(); d = backoff_delay(policy, attempt);"
    " fut = loop.create_future(); loop.call_later(d, fut.set_result, None);"
    " loop._LoopTimeEventLoop__now += loop._LoopTimeEventLoop__time2int(d); await fut"
)
BLANK_LINES = (
    wrap_pages(
        setup="_where = [None]",
        before="",
        each="""if _where[0] is not None:
    with open(_where[0], "ab") as f:
        f.write(b"\\n" * len(page))""",
    )
    + """
_collecting_ingest = ingest


async def ingest(source, path):
    _where[0] = path
    try:
        return await _collecting_ingest(source, path)
    finally:
        _where[0] = None
"""
)
DECOY_WATCHED = wrap_pages(
    setup="from pathlib import Path as _Path",
    before="""transport = getattr(self.client, "_transport", None)
decoy = None
if getattr(transport, "watch", None) is not None:
    decoy = _Path(str(transport.watch) + ".decoy")
    decoy.unlink(missing_ok=True)
    transport.watch = decoy""",
    each="""if decoy is not None:
    await JsonlSink(decoy).load(page)""",
)


#: Honest code the ledger must not cost a point: a heartbeat thread that sleeps blocks no
#: loop of a probe's, and a wait made with a timer of its own is a wait.
HEARTBEAT = """
import threading
import time


def _heartbeat():
    while True:
        time.sleep(0.005)


threading.Thread(target=_heartbeat, daemon=True).start()
"""
OWN_TIMER = (
    "loop = asyncio.get_running_loop(); fut = loop.create_future();"
    " loop.call_later(delay, fut.set_result, None); await fut"
)


#: The loop's page fetched again (the known bug), and the fixture's request log tidied of
#: that revisit after each request (a page asked for again, not right after itself).
REQUEST_LOG_EDITED = (
    _PROBES_OF
    + """

_Recorder = _probes_with("Recorder").get("Recorder")
if _Recorder is not None:
    _handle = _Recorder.handle_async_request

    async def _tidied(self, request):
        try:
            return await _handle(self, request)
        finally:
            kept, seen = [], set()
            for entry in self.requests:
                if entry[0] in seen and kept and kept[-1][0] != entry[0]:
                    continue
                seen.add(entry[0])
                kept.append(entry)
            self.requests[:] = kept

    _Recorder.handle_async_request = _tidied
"""
)


#: A second review's attacks: an `end` and a `run` written early, so a phantom run soaked up
#: the extra wait; the bytes a streaming ingest would have written shown to the probe's file
#: reader through a replaced `Path.read_bytes`, or through a state function put on the
#: recorder the client holds.
PHANTOM_RUN = (
    "import grader.suites.observe as _o; _o.tick('end'); _o.tick('run'); _o._runs[0] += 1; "
    + EXTRA_WAIT
)
PREDICTED_BYTES = wrap_pages(
    setup="""import builtins as _b
import pathlib as _pl
import sys as _sys
from etl.sinks import row_to_json as _row_to_json

if not hasattr(_b, "_so_far"):
    _b._so_far = []
    _real_read_bytes = _pl.Path.read_bytes

    def _read_bytes(self):
        if _sys._getframe(1).f_code.co_name == "file_state":
            return "".join(_row_to_json(r) + "\\n" for r in _b._so_far).encode("utf-8")
        return _real_read_bytes(self)

    _pl.Path.read_bytes = _read_bytes""",
    before="so_far = _b._so_far\nso_far.clear()",
    each="so_far.extend(page)",
)
STATE_SWAPPED = wrap_pages(
    setup="""import hashlib as _hl
from etl.sinks import row_to_json as _row_to_json""",
    before="""so_far = []
transport = getattr(self.client, "_transport", None)


def _predicted(*args):
    data = "".join(_row_to_json(r) + "\\n" for r in so_far).encode("utf-8")
    return [len(data), _hl.sha256(data).hexdigest()]


if transport is not None:
    transport._state = _predicted""",
    each="so_far.extend(page)",
)


def streamed_lie(name: str, code: str) -> Learner:
    """A collect-everything ingest with `code` making it look streamed to a probe: held at
    its twin's score, failing the test that watches the file."""
    return Learner(
        name,
        collecting(code),
        twin="twin_collects_everything",
        build="05",
        fails=("pages_are_written_as_they_arrive",),
    )


def solution05() -> Notebook:
    return read(ROOT / str(BUILD05.solution))


def build05(make: Callable[[], Notebook]) -> Callable[[Path], object]:
    return lambda folder: write(folder, make(), Path(BUILD05.path).name)


def collecting(code: str = "") -> Callable[[Path], object]:
    return build05(
        lambda: (
            at_end(with_mutant(solution05(), "05", "collects_everything_then_writes"), code)
            if code
            else with_mutant(solution05(), "05", "collects_everything_then_writes")
        )
    )


def with_mutant(nb: Notebook, build: str, name: str) -> Notebook:
    """A copy of `nb` with the known bug `name` of build `build` made in its answer cells."""
    nb = copy.deepcopy(nb)
    mutant = next(m for m in load_suite(build).mutants if m.name == name)
    for edit in mutant.edits:
        cell = next(c for c in answer_cells(nb) if edit.old in cell_source(c))
        cell["source"] = cell_source(cell).replace(edit.old, edit.new)
    return nb


def replaying(code: str) -> Callable[[Path], object]:
    """The stub with `code` run at load, after the replay preamble."""

    def make(folder: Path) -> object:
        text = REPLAY.replace("@RECORDED@", repr(json.dumps(recorded("03")))) + code
        return write(folder, at_load(exercise(), text))

    return make


def build07(make: Callable[[], Notebook]) -> Callable[[Path], object]:
    return lambda folder: write(folder, make(), Path(BUILD07.path).name)


def solution07() -> Notebook:
    return read(ROOT / str(BUILD07.solution))


DIGEST_TESTS = (
    "same_content_hashes_stable_distinct_content_differs",
    "content_key_is_stable_and_distinguishes_rows",
    "content_id_is_sha256_of_kind_nul_canonical",
    "content_key_hashes_the_canonical_json",
    "keys_equal_across_interpreters",
)
PARSE_ERROR_TESTS = (
    "content_key_is_stable_and_distinguishes_rows",
    "row_without_canonical_form_raises_parse_error",
    "parse_failure_mid_batch_remembers_nothing",
)
JITTER_TESTS = ("full_jitter_stays_within_bounds", "full_jitter_spreads_over_the_whole_range")

FORGERIES: tuple[Learner, ...] = (
    Learner("forge_probes_by_frame_walk", replaying(FRAME_WALK), 0, "graded"),
    Learner("forge_probes_through_gc", replaying(THROUGH_GC), 0, "graded"),
    Learner("forge_result_stream", replaying(FORGED_STREAM), 0),
    Learner(
        "forge_consistent_digests",
        cheat(CONSISTENT_DIGESTS),
        fails=DIGEST_TESTS,  # the sink works with any consistent key: those points are earned
    ),
    Learner(
        "forge_empty_jitter_draws",
        lambda folder: write(
            folder,
            at_load(
                stubbed(solution(), "backoff_delay"),
                REPLAY.replace("@RECORDED@", repr(json.dumps(recorded("03")))) + EMPTY_DRAWS,
            ),
        ),
        twin="twin_empty_jitter_draws",
        fails=JITTER_TESTS,
    ),
    Learner("twin_empty_jitter_draws", twin("backoff_delay")),
    Learner(
        "forge_local_parse_error",
        cheat(LOCAL_PARSE_ERROR.replace("@NAME@", "ParseError")),
        twin="twin_local_parse_error",
        fails=PARSE_ERROR_TESTS,
    ),
    Learner("twin_local_parse_error", cheat(LOCAL_PARSE_ERROR.replace("@NAME@", "NotParse"))),
    Learner(
        "forge_rebinds_etl_kinds",
        nb_maker(
            lambda: at_load(
                at_end(solution(), LOCAL_PARSE_ERROR.replace("@NAME@", "Bad")), REBINDS_ETL
            )
        ),
        twin="twin_local_parse_error",
        fails=PARSE_ERROR_TESTS,
    ),
    Learner("forge_reads_reference_seams", nb_maker(lambda: at_load(exercise(), READS_SEAMS)), 0),
    Learner(
        "forge_lying_connection",
        build07(
            lambda: at_end(with_mutant(solution07(), "07", "deferred_begin"), LYING_CONNECTION)
        ),
        twin="twin_lying_connection",
        build="07",
        fails=("explicit_transaction_per_page",),
    ),
    Learner(
        "twin_lying_connection",
        build07(lambda: with_mutant(solution07(), "07", "deferred_begin")),
        build="07",
    ),
)

TIME_FORGERIES: tuple[Learner, ...] = (
    Learner("honest_background_heartbeat", cheat(HEARTBEAT), FULL),
    Learner("honest_wait_on_its_own_timer", cheat(retry(OWN_TIMER)), FULL),
    Learner(
        "forge_clock_rewound",
        cheat(retry("await asyncio.sleep(delay)", EXTRA_WAIT_REWOUND)),
        twin="twin_clock_rewound",
        fails=("exhaustion_reraises_the_last_error", "n_attempts_sleep_n_minus_1_times"),
    ),
    Learner("twin_clock_rewound", cheat(retry("await asyncio.sleep(delay)", EXTRA_WAIT))),
    Learner(
        "forge_end_tick_early",
        cheat(retry("await asyncio.sleep(delay)", END_EARLY)),
        twin="twin_clock_rewound",
        fails=("exhaustion_reraises_the_last_error", "n_attempts_sleep_n_minus_1_times"),
    ),
    Learner(
        "forge_phantom_run",
        cheat(retry("await asyncio.sleep(delay)", PHANTOM_RUN)),
        twin="twin_clock_rewound",
        fails=("exhaustion_reraises_the_last_error", "n_attempts_sleep_n_minus_1_times"),
    ),
    Learner(
        "forge_clock_moved_over_a_timer",
        cheat(retry("await asyncio.sleep(delay)", MOVED_OVER_A_TIMER)),
        twin="twin_clock_rewound",
        fails=("exhaustion_reraises_the_last_error", "n_attempts_sleep_n_minus_1_times"),
    ),
    Learner("forge_clock_skipped", cheat(retry(_SKIP)), twin="twin_no_wait", fails=TIME_TESTS),
    Learner("twin_no_wait", cheat(retry(FAKE_WAIT))),
    Learner(
        "forge_sleep_replaced",
        cheat(retry("await asyncio.sleep(delay)", extra=SLEEP_SKIPS)),
        twin="twin_sleep_noop",
        fails=TIME_TESTS,
    ),
    Learner("twin_sleep_noop", cheat(retry("await asyncio.sleep(delay)", extra=SLEEP_NOOP))),
    Learner(
        "forge_probe_timer_replaced",
        cheat(retry(FAKE_WAIT, extra=TIMER_REPLACED)),
        twin="twin_no_wait",
        fails=TIME_TESTS,
    ),
    Learner(
        "forge_code_swapped",
        cheat(retry(FAKE_WAIT, extra=CODE_SWAPPED)),
        twin="twin_no_wait",
        fails=TIME_TESTS,
    ),
    Learner(
        "forge_fixture_helper_replaced",
        cheat(retry(FAKE_WAIT, extra=FIXTURE_REPLACED)),
        twin="twin_no_wait",
        fails=TIME_TESTS,
    ),
    Learner(
        "forge_blocking_hidden",
        cheat(retry(BLOCKING_HIDDEN)),
        twin="twin_blocking",
        fails=(*TIME_TESTS, "sleeps_on_the_event_loop_not_the_thread"),
    ),
    Learner("twin_blocking", cheat(retry("time.sleep(delay)"))),
    Learner(
        "forge_sink_record_edited",
        nb_maker(lambda: at_end(with_mutant(solution(), "03", "no_lock"), SINK_RECORD_EDITED)),
        twin="twin_no_lock",
        fails=("concurrent_loads_write_once",),
    ),
    Learner("twin_no_lock", nb_maker(lambda: with_mutant(solution(), "03", "no_lock"))),
    streamed_lie("forge_stdlib_replaced", STREAMING_LOOK),
    streamed_lie("forge_probe_global_rebound", LINES_REBOUND),
    streamed_lie("forge_blank_lines_as_pages_come", BLANK_LINES),
    streamed_lie("forge_decoy_file_watched", DECOY_WATCHED),
    streamed_lie("forge_predicted_bytes", PREDICTED_BYTES),
    streamed_lie("forge_state_swapped", STATE_SWAPPED),
    Learner("twin_collects_everything", collecting(), build="05"),
    Learner(
        "forge_request_log_edited",
        build05(
            lambda: at_end(
                with_mutant(solution05(), "05", "loop_checked_after_fetching"), REQUEST_LOG_EDITED
            )
        ),
        twin="twin_refetches_the_loop",
        build="05",
        fails=("next_leading_back_raises_parse_error",),
    ),
    Learner(
        "twin_refetches_the_loop",
        build05(lambda: with_mutant(solution05(), "05", "loop_checked_after_fetching")),
        build="05",
    ),
)

FORGERIES = FORGERIES + TIME_FORGERIES

CORPUS: tuple[Learner, ...] = ROBUST + CHEATS + FORGERIES


def write_corpus(folder: Path, out: Path) -> dict[str, Learner]:
    """Write every corpus learner under `folder` (to be graded into `out`); returns them by
    name."""
    folder.mkdir(parents=True, exist_ok=True)
    PLACES.update(SUBMISSIONS=str(folder), OUT=str(out))
    for learner in CORPUS:
        learner.make(folder / learner.name)
    return {learner.name: learner for learner in CORPUS}


def write_arc(folder: Path, kind: str) -> list[str]:
    """A learner holding every graded build's solution (``kind="solution"``) or exercise."""
    builds = []
    for entry in MANIFEST.graded:
        path = ROOT / (entry.solution if kind == "solution" and entry.solution else entry.path)
        if path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / Path(entry.path).name).write_bytes(path.read_bytes())
            builds.append(entry.number)
    return builds
