"""``python -m grader.validity``: validity, kept at this name for the commands and checks that
run it; it lives in `grader.proofs.suite_validity`."""

from grader.proofs.suite_validity import main

if __name__ == "__main__":
    raise SystemExit(main())
