"""Reproducible comparisons against the peers; run with ``./dev bench [name ...]``."""
