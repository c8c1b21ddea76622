"""Build 05's checks a learner sees and runs (the self-check cells, `make progress`, pytest)."""
