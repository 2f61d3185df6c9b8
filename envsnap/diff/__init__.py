"""Two snapshots (or a fleet) -> ranked findings, and their renderers."""
