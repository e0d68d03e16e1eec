"""The compare page's first screen: one table per compared point, a row per side (output tokens/s,
TTFT and ITL p50/p99, error rate, status) and a row of ratios, head against base: "×" for
throughput, "%" for latency, each coloured by its verdict; and one sentence that says it."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from qualflow.evidence.compare.comparison import Comparison
from qualflow.evidence.compare.stats import INCONCLUSIVE, direction

# (metric label, stat, summary column, header, is throughput)
COLUMNS = (
    (
        "output tokens/s (AIPerf aggregate)",
        "aggregate",
        "output_token_throughput_tps",
        "output tok/s",
        True,
    ),
    ("TTFT", "p50", "client_ttft_ms_p50", "TTFT p50 ms", False),
    ("TTFT", "p99", "client_ttft_ms_p99", "TTFT p99 ms", False),
    ("ITL", "p50", "client_itl_ms_p50", "ITL p50 ms", False),
    ("ITL", "p99", "client_itl_ms_p99", "ITL p99 ms", False),
)
CSS = (
    ".pt td.side{text-align:left;font-weight:bold}.pt tr.ratio td{background:#fafafa}"
    ".pt td.reg{background:#fdecea}.pt td.imp{background:#e8f5e9}.pt td.inc{background:#fff8e1}"
    ".ident{color:#555;font-size:12px}"
)


BASE_VIEW = {"reg": "imp", "imp": "reg"}


def _finite(v) -> bool:
    return v is not None and not (isinstance(v, float) and not np.isfinite(v)) and not pd.isna(v)


def _num(v) -> str:
    if not _finite(v):
        return "n/a"
    v = float(v)
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def verdict_class(verdict) -> str:
    d = direction(verdict)
    return {"regression": "reg", "improvement": "imp"}.get(
        d, "inc" if verdict == INCONCLUSIVE else "dim"
    )


def ratio_text(base, head, throughput: bool) -> str:
    """Head against base: a throughput as "0.053×", a latency as "+2,153 %"."""
    if not (_finite(base) and _finite(head)) or not float(base):
        return "n/a"
    if throughput:
        r = float(head) / float(base)
        return f"{r:.3g}×" if r < 100 else f"{r:,.0f}×"
    return f"{(float(head) - float(base)) / abs(float(base)) * 100:+,.0f} %"


def _row(m: pd.DataFrame, key: tuple, label: str, stat: str) -> dict | None:
    if m.empty:
        return None
    hit = m[
        (m["model"] == key[0])
        & (m["profile"] == key[1])
        & (m["point_id"] == key[2])
        & (m["label"] == label)
        & (m["stat"] == stat)
    ]
    return hit.iloc[0].to_dict() if len(hit) else None


def _values(cmp: Comparison, key: tuple) -> list[tuple]:
    """Per column: (base, head, verdict): the tested row's figures, else the summary's."""
    figs = cmp.statuses.get(key, {"base": {}, "head": {}})
    out = []
    for label, stat, col, _, _ in COLUMNS:
        r = _row(cmp.metrics, key, label, stat)
        out.append(
            (r["base"], r["head"], str(r["verdict"]))
            if r
            else (figs["base"].get(col), figs["head"].get(col), "not tested")
        )
    return out


def _cells(cmp: Comparison, key: tuple) -> list[tuple[str, str, str, str, str]]:
    """Per column: (base text, head text, ratio text, ratio class, verdict)."""
    return [
        (_num(b), _num(h), ratio_text(b, h, c[4]), verdict_class(v), v)
        for c, (b, h, v) in zip(COLUMNS, _values(cmp, key))
    ]


def point_table(cmp: Comparison, key: tuple) -> str:
    """One point's table: base, head, and the ratios."""
    names = {n.side: n.name for n in cmp.names} or {"base": "base", "head": "head"}
    figs = cmp.statuses.get(key, {"base": {}, "head": {}})
    cells = _cells(cmp, key)
    head = "".join(f"<th>{html.escape(c[3])}</th>" for c in COLUMNS)
    rows = [
        f"<table class='t pt' data-point='{html.escape(key[2], quote=True)}'><tr><th>side"
        f"</th>{head}"
        "<th>error rate</th><th>status</th></tr>"
    ]
    for i, side in enumerate(("base", "head")):
        f = figs.get(side, {})
        err = f.get("error_rate")
        rows.append(
            f"<tr><td class='side'>{side}: {html.escape(names[side])}</td>"
            + "".join(f"<td>{c[i]}</td>" for c in cells)
            + f"<td>{'n/a' if not _finite(err) else f'{float(err):.1%}'}</td>"
            f"<td>{html.escape(str(f.get('status') or 'n/a'))}</td></tr>"
        )
    st_b, st_h = figs.get("base", {}).get("status"), figs.get("head", {}).get("status")
    rows.append(
        "<tr class='ratio'><td class='side'>head vs base</td>"
        + "".join(
            f"<td class='{c[3]}' title='{html.escape(c[4], quote=True)}'>{c[2]}</td>" for c in cells
        )
        + "<td></td>"
        + f"<td>{'same' if st_b == st_h else 'changed'}</td></tr></table>"
    )
    return "".join(rows)


def _lower_higher(b: float, h: float) -> str:
    """b against h: "22× lower" / "26 % higher" (a factor from 2 on)."""
    lo, hi = sorted((abs(b), abs(h)))
    word = "lower" if b < h else "higher"
    if lo and hi / lo >= 2:
        return f"{hi / lo:.3g}× {word}"
    return f"{abs(b - h) / abs(h) * 100:,.0f} % {word}"


def point_sentence(cmp: Comparison, key: tuple) -> str:
    """The point in one sentence, from the base's side: "18.8× the output tok/s, 22× lower ITL p50",
    each coloured as the base fares (green where the head regressed)."""
    names = {n.side: n.name for n in cmp.names} or {"base": "base", "head": "head"}
    parts = []
    for (_, _, _, header, tput), (bv, hv, verdict) in zip(COLUMNS, _values(cmp, key)):
        if not (_finite(bv) and _finite(hv)) or not float(hv) or not float(bv):
            continue
        # told from the base's side: the head's regression is the base's advantage
        name, cls = (
            header.replace(" ms", ""),
            BASE_VIEW.get(verdict_class(verdict), verdict_class(verdict)),
        )
        text = (
            f"{ratio_text(hv, bv, True)} the {name}"
            if tput
            else f"{_lower_higher(float(bv), float(hv))} {name}"
        )
        parts.append(f"<span class='{cls}'>{text}</span>")
    if not parts:
        return ""
    return (
        f"<p class='sentence'><b>{html.escape(names['base'])}</b> against the head: "
        f"{', '.join(parts)}.</p>"
    )


def first_screen(cmp: Comparison, order) -> list[str]:
    """The sides' names and identities, then one table (and sentence) per point in load order."""
    parts = []
    if cmp.names:
        parts.append(
            "<ul class='ident' id='sides'>"
            + "".join(
                f"<li><b>{n.side}</b>: {html.escape(n.name)}: {html.escape(n.identity_text())}</li>"
                for n in cmp.names
            )
            + "</ul>"
        )
    for key in sorted(cmp.statuses, key=order):
        parts += [
            f"<h2>{html.escape('/'.join(key))}</h2>",
            point_sentence(cmp, key),
            point_table(cmp, key),
        ]
    return parts
