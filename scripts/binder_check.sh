#!/usr/bin/env bash
# Binder terms, without Docker: do by hand what repo2docker does with this repository, then
# drive the result with the browser suite.
#
#   1. Take the committed tree (a clone of HEAD: Binder builds what is pushed, not local edits;
#      --worktree takes tracked and untracked-but-not-ignored files as they are now).
#   2. Check the Python version repo2docker would pick (runtime.txt, else its default 3.10)
#      against pyproject's requires-python.
#   3. A fresh venv; `pip install -r requirements.txt` from the tree's root. No make.
#   4. JupyterLab from that venv, started from the tree's root, driven by tests/browser
#      (WORKBOOK_JUPYTER_PYTHON points the suite at it). A skipped test counts as a failure.
#
# Usage: scripts/binder_check.sh [--worktree] [--reuse-venv]
# Env:   BINDER_VENV (default /tmp/binder-venv), PYTHON (default: runtime.txt's, else python3)
# Screenshots: artifacts/browser/binder/. Needs Chromium (apt-get install chromium).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${BINDER_VENV:-/tmp/binder-venv}"
WORKTREE=0
REUSE=0
for arg in "$@"; do
  case "$arg" in
    --worktree) WORKTREE=1 ;;
    --reuse-venv) REUSE=1 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "binder_check: unknown argument $arg" >&2; exit 2 ;;
  esac
done

step() { printf '\n== %s\n' "$*"; }
problems=()
started=$SECONDS

if ! command -v "${CHROMIUM:-chromium}" >/dev/null 2>&1; then
  echo "binder_check: Chromium is not installed (apt-get install chromium); nothing to drive." >&2
  exit 2
fi

SCRATCH="$(mktemp -d /tmp/binder-check.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
TREE="$SCRATCH/repo"

step "1. the tree Binder would see"
if [ "$WORKTREE" = 1 ]; then
  mkdir -p "$TREE"
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$ROOT" && xargs -0 cp --parents -t "$TREE" 2>/dev/null || true)
  echo "working tree of $ROOT (tracked and untracked, minus ignored)"
else
  git clone --quiet --no-hardlinks "$ROOT" "$TREE"
  echo "clone of $(git -C "$ROOT" rev-parse --short HEAD) ($(git -C "$ROOT" log -1 --format=%s))"
fi
if [ ! -d "$TREE/tests/browser" ]; then
  echo "binder_check: this tree has no tests/browser (a learner copy?)" >&2
  exit 2
fi

step "2. which Python repo2docker would use"
RUNTIME="$(tr -d '[:space:]' 2>/dev/null < "$TREE/runtime.txt" || true)"
if [[ "$RUNTIME" =~ ^python-(3\.[0-9]+)$ ]]; then
  WANT="${BASH_REMATCH[1]}"
  echo "runtime.txt asks for Python $WANT"
else
  WANT="3.10"
  echo "no runtime.txt: repo2docker uses its default, Python $WANT"
fi
REQUIRES="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"].get("requires-python", ""))' "$TREE/pyproject.toml")"
if ! python3 - "$WANT" "$REQUIRES" <<'PY'; then
import re, sys
want = tuple(int(p) for p in sys.argv[1].split("."))
floor = re.search(r">=\s*(\d+)\.(\d+)", sys.argv[2])
sys.exit(1 if floor and want < (int(floor[1]), int(floor[2])) else 0)
PY
  problems+=("Binder would build Python $WANT but pyproject.toml requires $REQUIRES: \`pip install -e .\` fails there. Add runtime.txt containing python-3.11.")
  echo "PROBLEM: ${problems[-1]}"
else
  echo "requires-python $REQUIRES: satisfied"
fi
# Without runtime.txt the build above already failed; carry on with python3 to check the rest.
PY="${PYTHON:-}"
if [ -z "$PY" ] && [ -n "$RUNTIME" ] && "python$WANT" --version >/dev/null 2>&1; then
  PY="$(command -v "python$WANT")"
fi
PY="${PY:-$(command -v python3)}"
echo "building the venv with $("$PY" --version) ($PY)"

step "3. fresh venv, pip install -r requirements.txt (no make)"
if [ "$REUSE" = 1 ] && [ -x "$VENV/bin/python" ]; then
  echo "reusing $VENV"
else
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
install_start=$SECONDS
# (A local pip.conf may name find-links folders that do not exist; that noise is dropped.)
(cd "$TREE" && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r requirements.txt 2>&1) | { grep -v "is ignored: it is neither a file nor a directory" || true; }
echo "installed in $((SECONDS - install_start)) s"
"$VENV/bin/python" -m jupyter labextension list 2>&1 | grep -i -E "widgets|enabled" | head -5 || true

step "4. JupyterLab from that venv, from the tree's root, driven by the browser suite"
set +e
(cd "$TREE" && WORKBOOK_JUPYTER_PYTHON="$VENV/bin/python" \
  "$VENV/bin/python" -m pytest tests/browser -p no:randomly -p no:cacheprovider -rs \
  --junitxml="$SCRATCH/junit.xml")
suite=$?
set -e
mkdir -p "$ROOT/artifacts/browser/binder"
cp "$TREE"/artifacts/browser/*.png "$TREE"/artifacts/browser/jupyterlab.log \
  "$ROOT/artifacts/browser/binder/" 2>/dev/null || true
skipped="$("$VENV/bin/python" -c 'import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); s = r if r.tag == "testsuite" else r[0]; print(s.get("skipped", "0"))' "$SCRATCH/junit.xml" 2>/dev/null || echo "?")"
if [ "$suite" != 0 ]; then
  problems+=("the browser suite failed (exit $suite) against the Binder-style venv")
elif [ "$skipped" != 0 ]; then
  problems+=("the browser suite skipped $skipped test(s): a skipped test proves nothing here")
fi

step "summary ($((SECONDS - started)) s; screenshots in artifacts/browser/binder/)"
if [ "${#problems[@]}" = 0 ]; then
  echo "Binder terms hold: requirements.txt alone gives a JupyterLab where widgets render and the notebooks run."
  exit 0
fi
for p in "${problems[@]}"; do echo "FAIL: $p"; done
exit 1
