"""Visible checks, one module per build (``buildNN``), each exposing ``CHECKS``."""
