"""Execution records on disk: records, stores, line logs, terminal text, ranges and search."""
