"""Benchmark runs on a host, their statistics and verdicts."""
