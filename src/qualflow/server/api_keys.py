"""The API keys of `qualflow serve --api-key`: where they come from (`env:VAR`, `file:PATH`, or the
keys themselves, comma-separated) and the owner each one stands for (store.owner_of: a hash of it,
never the key)."""

from __future__ import annotations

import os
import re
from pathlib import Path

_SPLIT = re.compile(r"[,\s]+")


def load_api_keys(spec: str | None) -> frozenset[str]:
    """The keys `spec` names; empty when it is None (no authentication). ValueError naming the
    variable or the file when they hold none or cannot be read."""
    if spec is None:
        return frozenset()
    if spec.startswith("env:"):
        name = spec[4:]
        text, where = os.environ.get(name), f"the environment variable {name}"
        if text is None:
            raise ValueError(f"--api-key {spec}: {where} is not set")
    elif spec.startswith("file:"):
        where = f"the file {spec[5:]}"
        try:
            text = Path(spec[5:]).expanduser().read_text()
        except OSError as e:
            raise ValueError(f"--api-key {spec}: cannot read {where}: {e.strerror}") from None
    else:
        text, where = spec, "the flag"
    keys = frozenset(k for k in _SPLIT.split(text) if k)
    if not keys:
        raise ValueError(f"--api-key {spec}: {where} holds no key")
    return keys
