# The grader where bubblewrap cannot run (macOS, Windows): `make check SUBMISSIONS=...` with
# its walls, inside a Linux container. Instructor only: the image holds the hidden tests and
# the solutions, so never push it to a public registry.
#   docker build -t run-it-twice-grader .
#   docker run --rm --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       -v "$PWD/class:/class:ro" -v "$PWD/grades:/grades" \
#       run-it-twice-grader check SUBMISSIONS=/class OUT=/grades
# The two --security-opt flags let bubblewrap make its namespaces (Docker's default seccomp
# profile and AppArmor policy forbid that); they add no capability (README, "Graders off Linux").
FROM python:3.11-slim-bookworm

# bubblewrap raises the walls; make runs the commands.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap make \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /workbook
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1

# The pinned packages first, in a layer of their own: a change to the code reuses it.
COPY requirements.txt ./
RUN python -m venv .venv \
    && grep -v '^-e ' requirements.txt > /tmp/pinned.txt \
    && .venv/bin/pip install -r /tmp/pinned.txt

# Then the repository, installed as requirements.txt says (its last line is `-e .`). The stamp
# tells make the venv is built; every user may read the interpreter (workers drop to others).
COPY . .
RUN .venv/bin/pip install -r requirements.txt \
    && touch .venv/.installed \
    && chmod -R a+rX /workbook

ENTRYPOINT ["make"]
CMD ["help"]
