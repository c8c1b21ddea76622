"""``scripts/notebook_stats.py``: the concept notebooks' reading budgets, kept at this path for
the commands that run it; it lives in `grader.proofs.notebook_stats`."""

from grader.proofs.notebook_stats import main

if __name__ == "__main__":
    raise SystemExit(main())
