"""Build 08: Concept check. `visible/` ships to learners; `hidden/` never does."""
