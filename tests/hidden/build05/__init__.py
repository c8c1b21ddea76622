"""Build 05's hidden suite: probes.py (in the child), judges.py (here), mutants.toml."""
