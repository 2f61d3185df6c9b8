"""Restore a snapshot: plan, apply with a safety net, verify, rerun."""
