"""The confinement room: one confiner per OS mechanism, the probe, a confined kernel's launch."""
