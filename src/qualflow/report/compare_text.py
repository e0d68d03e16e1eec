"""How the compare page writes a figure, a compared point, one delta, and a point's load (for
ordering points by it)."""

from __future__ import annotations

import html
import re

import numpy as np


def fmt(v, pct=False):
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    if pct:
        return f"{v:+.1%}"
    if isinstance(v, (float, np.floating)):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.1f}"
    return html.escape(str(v))


def load_order(point_id: str) -> tuple:
    """Points ordered by load: concurrency or rate, read from the point id's `_c<N>` / `_r<N>`
    suffix."""
    m = re.search(r"_([cr])(\d+(?:p\d+)?)", str(point_id))
    return (
        str(point_id).split("_")[0],
        m.group(1) if m else "",
        float(m.group(2).replace("p", ".")) if m else 0.0,
    )


def point_name(r: dict) -> str:
    return (
        f"{html.escape(r['model'])}/{html.escape(r['profile'])}/{html.escape(str(r['point_id']))}"
    )


def change(r: dict) -> str:
    """One delta as a line: `point: metric stat base -> head unit (rel`."""
    return (
        f"{point_name(r)}: {html.escape(r['label'])} {r['stat']} {fmt(r['base'])} &rarr; "
        f"{fmt(r['head'])} {html.escape(r['unit'])} ({fmt(r['rel_delta'], pct=True)}"
    )
