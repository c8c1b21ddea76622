"""The hidden suites (instructor only): per build, probes that run in the grading child and
judges (pytest tests) that run in the parent. See README.md here for the threat model."""
