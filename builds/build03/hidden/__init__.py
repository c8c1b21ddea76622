"""Build 03's hidden suite: probes (walled in), judges (in the grader), known bugs."""
