"""Residency: kernels that outlive the gateway: their launch, identity, files and taking back."""
