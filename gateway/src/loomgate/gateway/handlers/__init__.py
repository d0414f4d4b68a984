"""The HTTP endpoints under /api/loomgate/: one module per resource, mounted by routes."""
