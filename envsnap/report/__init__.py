"""Bug reports of a snapshot (markdown, html, json) and bundles."""
