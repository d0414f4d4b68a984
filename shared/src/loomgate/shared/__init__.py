"""loomgate.shared: what both halves need — the output-log model, the record wire schema, paths."""
