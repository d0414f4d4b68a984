"""The policy room: profiles, sandbox.toml, which profile a kernel gets, what stays hidden."""
