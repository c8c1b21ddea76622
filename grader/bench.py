"""``python -m grader.bench``: the class bench, kept at this name for the commands and checks
that run it; it lives in `grader.proofs.class_bench`."""

from grader.proofs.class_bench import main

if __name__ == "__main__":
    raise SystemExit(main())
