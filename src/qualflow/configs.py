"""Frozen config dataclasses to and from the command line: one definition of each setting.

A layer's config (runtime.config.EngineConfig, server.config.ServerConfig,
session.config.SessionConfig) is a frozen dataclass. Its field defaults are the only defaults;
`add_arguments` generates the CLI flags from the fields (name `max_batch` -> `--max-batch`, the type
from the annotation, the help from `setting(help=...)`), `from_args` builds the config back from the
parsed flags, and `to_argv` gives the flags that reproduce a config (how a session starts `qualflow
serve` with exactly its settings).

A field whose type is itself a config dataclass is flattened: its flags are added beside the outer
ones, and it is built from them. A leaf module: it imports nothing from qualflow."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar

C = TypeVar("C")

_SUPPRESS_KEY = "qualflow_suppress"
_SETTLED_KEY = "qualflow_settled"


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    flag: str | None = None,
    hidden: bool = False,
    settled: bool = False,
    metavar: Any = None,
    bare: Any = None,
    negated: Any = None,
) -> Any:
    """A config field with its help text. `flag`: the flag name when it is not `--<field-name>`;
    `hidden`: accepted on the command line but left out of --help (test-only knobs); `settled`:
    an A/B switch whose question is settled (its default won), left out of --help too but an
    ordinary setting otherwise (recorded where set, unlike a hidden one). For a choice field that
    was once a switch, `bare` is the value of the flag given without one and `negated` the value
    of `--no-<flag>` (so the switch's old spellings keep working)."""
    meta = {
        "help": help,
        "flag": flag,
        _SUPPRESS_KEY: hidden,
        _SETTLED_KEY: settled,
        "metavar": metavar,
        "bare": bare,
        "negated": negated,
    }
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """(T, True) for `T | None`, (tp, False) otherwise."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def is_config(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _argument(f: dataclasses.Field, tp: Any) -> tuple[str, dict]:
    """The argparse flag and keyword arguments of one field."""
    tp, _ = _unwrap_optional(tp)
    quiet = f.metadata.get(_SUPPRESS_KEY) or f.metadata.get(_SETTLED_KEY)
    kw: dict[str, Any] = {
        "dest": f.name,
        "help": argparse.SUPPRESS if quiet else f.metadata.get("help"),
    }
    if f.metadata.get("metavar") is not None:
        kw["metavar"] = f.metadata["metavar"]
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        kw["required"] = True
    else:
        kw["default"] = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    origin = typing.get_origin(tp)
    if tp is bool:
        kw["action"] = argparse.BooleanOptionalAction
    elif origin is Literal:
        kw["choices"] = list(typing.get_args(tp))
        kw["type"] = type(kw["choices"][0])
        if f.metadata.get("bare") is not None:
            kw.update(nargs="?", const=f.metadata["bare"])
    elif origin is tuple:
        args = typing.get_args(tp)
        kw["nargs"] = len(args)
        kw["type"] = args[0]
    elif tp in (int, float, str):
        kw["type"] = tp
    else:
        raise TypeError(f"config field {f.name}: no flag for type {tp!r}")
    return flag_of(f), kw


def add_arguments(
    parser: argparse.ArgumentParser | Any, cls: type, *, skip: tuple[str, ...] = ()
) -> None:
    """Add one flag per field of `cls` (nested configs flattened); `skip`: fields left off the CLI
    (they keep their default)."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if is_config(hints[f.name]):
            add_arguments(parser, hints[f.name], skip=skip)
            continue
        flag, kw = _argument(f, hints[f.name])
        parser.add_argument(flag, **kw)
        if f.metadata.get("negated") is not None:
            parser.add_argument(
                "--no-" + flag[2:],
                dest=f.name,
                action="store_const",
                const=f.metadata["negated"],
                help=argparse.SUPPRESS,
            )


def from_args(cls: type[C], ns: argparse.Namespace | dict, **overrides: Any) -> C:
    """The config the parsed flags (or a dict of field values) describe; fields absent from `ns`
    keep their default, `overrides` win."""
    values = vars(ns) if isinstance(ns, argparse.Namespace) else dict(ns)
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in overrides:
            kwargs[f.name] = overrides[f.name]
        elif is_config(hints[f.name]):
            kwargs[f.name] = from_args(hints[f.name], values)
        elif f.name in values:
            v = values[f.name]
            kwargs[f.name] = tuple(v) if isinstance(v, list) else v
    return cls(**kwargs)


def to_argv(cfg: Any, *, only_changed: bool = True, skip: tuple[str, ...] = ()) -> list[str]:
    """Flags that rebuild `cfg` through `add_arguments` + `from_args`. With `only_changed`,
    fields at their default are left out, so the command a log shows holds only what was set."""
    out: list[str] = []
    hints = _hints(type(cfg))
    for f in dataclasses.fields(cfg):
        if f.name in skip:
            continue
        v = getattr(cfg, f.name)
        if is_config(hints[f.name]):
            out += to_argv(v, only_changed=only_changed, skip=skip)
            continue
        if only_changed and f.default is not dataclasses.MISSING and v == f.default:
            continue
        if v is None:
            continue
        flag = flag_of(f)
        if isinstance(v, bool):
            out.append(flag if v else "--no-" + flag[2:])
        elif isinstance(v, tuple):
            out += [flag, *map(str, v)]
        else:
            out += [flag, str(v)]
    return out


def defaults(cls: type) -> dict[str, Any]:
    """{field: default} of a config, nested configs flattened (what a schema's defaults must
    match)."""
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if is_config(hints[f.name]):
            out.update(defaults(hints[f.name]))
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
    return out


def hidden(cls: type) -> tuple[str, ...]:
    """The fields declared `hidden` (test-only knobs): accepted on the command line, not in
    --help."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(_SUPPRESS_KEY))


def as_dict(cfg: Any) -> dict[str, Any]:
    """The config as JSON-ready data (nested configs as dicts, tuples as lists)."""
    return dataclasses.asdict(
        cfg, dict_factory=lambda kv: {k: list(v) if isinstance(v, tuple) else v for k, v in kv}
    )
