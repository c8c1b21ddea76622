"""Build 05's hidden suite: probes (walled in), judges (in the grader), known bugs."""
