"""Talking to a gateway: transports, endpoints, holds, gateways.toml, the local gateway."""
