"""Who and what a run report is about, read from the evidence's `runs` table: per model/profile and
stack, the checkpoint (hub repo@revision, or local path@content hash), the bundle hash, the software
key, the hardware (CPU and GPU names) and the sessions' dates. The report opens with it, above the
ladder and the verdicts; `identity_line` is the same in one line of text for the terminal."""

from __future__ import annotations

import html
import json
from collections import Counter

import pandas as pd

# (row key, header) in the order the page shows them
FIELDS = (
    ("model", "model/profile"),
    ("checkpoint", "checkpoint"),
    ("bundle", "bundle hash"),
    ("software", "software key"),
    ("hardware", "hardware"),
    ("date", "date (session start, UTC)"),
)


def _json(text) -> dict:
    try:
        v = json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


def hardware_text(hardware, gpu=None) -> str:
    """ "CPU <name>; GPU 2× <name>" from the runs' hardware JSON (the leased GPU's name where the
    hardware names none)."""
    hw = _json(hardware)
    gpus = [g for g in hw.get("gpus") or [] if g] or [x for x in (_json(gpu).get("name"),) if x]
    parts = [f"CPU {hw['cpu']}"] if hw.get("cpu") else []
    if gpus:
        parts.append(
            "GPU " + ", ".join(f"{n}× {g}" if n > 1 else g for g, n in Counter(gpus).items())
        )
    return "; ".join(parts) or "unknown"


def _checkpoint(r: dict) -> str:
    ck, rev = _text(r.get("checkpoint")), _text(r.get("checkpoint_revision"))
    served = _text(r.get("served_model"))
    if not ck:
        return f"none pinned (served as {served})" if served else "none pinned"
    return f"{ck}@{rev}" if rev else ck


def _model(r: dict) -> str:
    stack = _text(r.get("stack")) or "qualflow"
    return f"{r.get('model')}/{r.get('profile')}" + ("" if stack == "qualflow" else f" ({stack})")


def identity_rows(runs: pd.DataFrame) -> list[dict]:
    """One row per identity (FIELDS) the runs share, in the order first seen; the date is the first
    session's start, through the last's where they differ."""
    rows: dict[tuple, dict] = {}
    for r in runs.to_dict("records") if len(runs) else []:
        row = {
            "model": _model(r),
            "checkpoint": _checkpoint(r),
            "bundle": _text(r.get("bundle_hash")) or "none",
            "software": _text(r.get("software_key")),
            "hardware": hardware_text(r.get("hardware"), r.get("gpu")),
        }
        dates = rows.setdefault(tuple(row.values()), {**row, "_dates": set()})["_dates"]
        dates.add(_text(r.get("started_utc")))
    out = []
    for row in rows.values():
        dates = sorted(d for d in row.pop("_dates") if d)
        out.append(
            {
                **row,
                "date": " to ".join(dict.fromkeys((dates[0], dates[-1]))) if dates else "unknown",
            }
        )
    return out


def identity_html(runs: pd.DataFrame) -> str:
    """The report's opening table: one row per identity of the runs it covers."""
    rows = identity_rows(runs)
    if not rows:
        return "<p id='identity'><i>no runs in the evidence</i></p>"
    head = "".join(f"<th>{h}</th>" for _, h in FIELDS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(r[k])}</td>" for k, _ in FIELDS) + "</tr>" for r in rows
    )
    return f"<table class='t' id='identity'><tr>{head}</tr>{body}</table>"


def identity_line(runs: pd.DataFrame) -> str:
    """The identities in one line each, joined by " | " (for the terminal)."""
    return " | ".join(
        ", ".join(f"{h.split(' (')[0]} {r[k]}" for k, h in FIELDS) for r in identity_rows(runs)
    )
