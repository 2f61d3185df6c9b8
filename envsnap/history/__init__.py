"""A deduplicated history of snapshots: content-addressed parts, a small manifest a record."""
