"""The records' convention for keys set only once the session reaches some point: `NOT_REACHED`
until then, left out of the file; and each record's JSON round trip under it (`json_of`,
`json_kwargs`)."""

from __future__ import annotations

import dataclasses
from typing import Any


class NotReached:
    """A key the session has not set yet: absent from the file. Falsy."""

    _instance: NotReached | None = None

    def __new__(cls) -> NotReached:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_REACHED"


NOT_REACHED = NotReached()


def reached(value: Any, default: Any = None) -> Any:
    """`value`, or `default` when it is NOT_REACHED."""
    return default if value is NOT_REACHED else value


def json_of(rec: Any, convert: dict[str, Any]) -> dict:
    """The record's fields in order, those NOT_REACHED left out; `convert`: field -> function."""
    out = {}
    for f in dataclasses.fields(rec):
        v = getattr(rec, f.name)
        if v is NOT_REACHED:
            continue
        out[f.name] = convert[f.name](v) if f.name in convert and v is not None else v
    return out


def json_kwargs(cls: type, d: dict, convert: dict[str, Any]) -> dict:
    """Constructor arguments from a file's dict: every key present (converted), absent ones
    default."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {
        k: (convert[k](v) if k in convert and v is not None else v)
        for k, v in d.items()
        if k in names
    }
