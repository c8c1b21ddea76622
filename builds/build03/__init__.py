"""Build 03: retry and the idempotent sink. `visible/` ships to learners; `hidden/` never does."""
