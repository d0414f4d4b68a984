"""The read-only monitor: its page, the credential that can only read, and reported tool calls."""
