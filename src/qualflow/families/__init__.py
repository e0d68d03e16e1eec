"""Model families. Everything model-specific lives in a family folder; a new family is a new folder
and one line in FAMILIES. Families import nothing from runtime, server or workflow code."""

from __future__ import annotations

import importlib
from typing import Any

FAMILIES = {"qwen3": "qualflow.families.qwen3"}


class UnknownFamily(ValueError):
    pass


def get_family(name: str) -> Any:
    """Return the family object (`<module>.FAMILY`) registered under `name`."""
    if name not in FAMILIES:
        raise UnknownFamily(f"unknown model family {name!r}; known: {sorted(FAMILIES)}")
    return importlib.import_module(FAMILIES[name]).FAMILY


def family_of_config(config: dict) -> str:
    """Family name from a Hugging Face config.json dict (its model_type)."""
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise UnknownFamily(
            f"config.json model_type {model_type!r} is not a known family; "
            f"known: {sorted(FAMILIES)}"
        )
    return model_type
