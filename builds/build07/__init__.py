"""Build 07: Capstone: a replay-safe batch. `visible/` ships to learners; `hidden/` never does."""
