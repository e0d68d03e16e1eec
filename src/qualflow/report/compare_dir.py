"""Where a comparison is written: `results/compare/<base>__vs__<head>`, each side's run spec as one
path component. A light module (pathlib only): the workflow names the compare rule's outputs with it
while the DAG is parsed."""

from __future__ import annotations

from pathlib import Path


def safe_name(spec: str) -> str:
    """A run spec as one path component: an evidence dir by its last component, every character
    outside [A-Za-z0-9._+@-] replaced by '_'."""
    s = str(Path(spec).name if "/" in spec else spec)
    return "".join(c if c.isalnum() or c in "._+-@" else "_" for c in s) or "unset"


def default_out_dir(base: str, head: str) -> Path:
    return Path("results/compare") / f"{safe_name(base)}__vs__{safe_name(head)}"
