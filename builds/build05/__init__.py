"""Build 05: a paginated source. `visible/` ships to learners; `hidden/` never does."""
