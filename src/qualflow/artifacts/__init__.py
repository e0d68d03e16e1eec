"""Artifacts: pin a checkpoint (hub sha or local dir, file hashes) and build its bundle for a
profile (weights in the runtime's layout, manifest, verified load)."""
