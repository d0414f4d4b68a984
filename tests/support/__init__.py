"""Helpers the tests share: real gateways, translators, websockets, event streams."""
