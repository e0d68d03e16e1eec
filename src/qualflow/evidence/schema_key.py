"""The columns every evidence table starts with, the schema version and the status ladder."""

from __future__ import annotations

SCHEMA_VERSION = "1.0"

STATUS_LADDER = (
    "planned",
    "implemented",
    "family-validated",
    "protocol-conformant",
    "aiperf-qualified",
    "slo-met",
)
# what each rung means: evidence/status.py (and docs/evidence.md's "Qualification status")

KEY = {
    "schema_version": "evidence schema version (this file's SCHEMA_VERSION)",
    "run_id": (
        "<model>.<profile>.<session start UTC>; unique per serving session; repeat k >= 2 of a "
        "point is its own run: <...>.r<k>"
    ),
    "software_key": "qualflow version + git sha the evidence was produced with",
    "model": "model name from the config",
    "profile": "build profile (e.g. fp16)",
}
