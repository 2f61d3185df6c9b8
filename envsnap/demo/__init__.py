"""The incident replayed on this machine, and the example host's story data."""
