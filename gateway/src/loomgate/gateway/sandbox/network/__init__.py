"""The network room: `network` rules, public addresses, a kernel's proxy, bridge and relays."""
