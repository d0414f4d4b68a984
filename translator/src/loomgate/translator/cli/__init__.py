"""`loomgate`: the person's command line: cells, records, kernels and the local gateway."""
