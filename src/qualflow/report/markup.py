"""HTML pieces shared by the run report and the compare page: DataFrame tables and embedded images
(base64, so a page opens offline on its own)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd


def img_tag(path: str | Path, alt: str = "") -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{data}'>"


def table_html(df: pd.DataFrame | None, float_fmt: str = "{:.4g}", scroll: bool = False) -> str:
    """A DataFrame as an escaped HTML table (class `t`); `scroll` wraps it to scroll sideways."""
    if df is None or df.empty:
        return "<p><i>none</i></p>"
    t = df.to_html(
        index=False,
        escape=True,
        na_rep="",
        border=0,
        classes="t",
        float_format=lambda v: float_fmt.format(v),
    )
    return f"<div style='overflow-x:auto'>{t}</div>" if scroll else t
