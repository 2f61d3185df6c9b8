"""Bisection between two snapshots' commits, judged by benchmark verdicts."""
