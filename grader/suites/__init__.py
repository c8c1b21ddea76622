"""The hidden suites' API: `loading` finds a build's suite (``builds/buildNN/hidden``) and its
known bugs; `observe` is the probes' half (in the walled-in worker), `judging` the judges'
half (here), `digest` the canonical JSON and content ids both halves compute.

Imports nothing: the walls bind `observe` and import this package to reach it.
"""
