"""loomgate.shared: what both halves use: the typed wire contract, paths, echoed values."""
