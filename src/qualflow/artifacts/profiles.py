"""Build profiles as data (profiles.yaml beside this file): the dtype a bundle is stored in and an
optional context cap."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


class UnknownProfile(ValueError):
    pass


@lru_cache(maxsize=1)
def profiles() -> dict[str, dict]:
    import yaml

    doc = yaml.safe_load(
        resources.files(__package__).joinpath("profiles.yaml").read_text(encoding="utf-8")
    )
    return doc["profiles"]


def get_profile(name: str) -> dict:
    p = profiles()
    if name not in p:
        raise UnknownProfile(f"unknown profile {name!r}; known profiles: {', '.join(sorted(p))}")
    return p[name]


def torch_dtype(name: str):
    import torch

    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise UnknownProfile(f"profile dtype {name!r} is not a torch dtype")
    return dt
