"""`qualflow compare`: two software versions' (or runs') evidence side by side. The comparison is
`qualflow.evidence.compare`; this writes its tables, compare.json and the page."""

from __future__ import annotations

import json
from pathlib import Path

from qualflow.configs import from_args
from qualflow.evidence import store
from qualflow.evidence.compare.comparison import compare_evidence
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.stats import INCONCLUSIVE
from qualflow.evidence.store import write_table
from qualflow.report.compare_dir import default_out_dir
from qualflow.report.compare_page import write_compare_page


def run_compare(
    base: str, head: str, *, root="results/evidence", out=None, opts: CompareOptions | None = None
) -> dict:
    root = Path(root)
    base_refs, head_refs = store.resolve(base, root), store.resolve(head, root)
    cmp = compare_evidence(base_refs, head_refs, base=base, head=head, opts=opts, root=root)
    out = Path(out) if out else default_out_dir(base, head)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "base": base,
        "head": head,
        "kind": cmp.kind,
        "kind_detail": cmp.kind_detail,
        "forced": bool(cmp.problems),
        "problems": cmp.problems,
        "notes": cmp.notes,
        "protocol_differs": cmp.protocol.differences(),
    }
    for name, df in (
        ("compare", cmp.metrics),
        ("points", cmp.points),
        ("provenance", cmp.provenance),
    ):
        df = df.copy()
        df["compare_base"], df["compare_head"], df["forced"] = base, head, bool(cmp.problems)
        write_table(df, out / f"{name}.parquet")
    page = write_compare_page(cmp, out)
    sig = cmp.metrics[cmp.metrics["significant"]] if len(cmp.metrics) else cmp.metrics
    res = {
        **meta,
        "out": str(out),
        "page": str(page),
        "points": len(cmp.points),
        "significant": [
            f"{r['model']}/{r['profile']}/{r['point_id']} {r['label']} {r['stat']}: "
            f"{r['rel_delta']:+.1%} ({r['verdict']})"
            for r in sig.to_dict("records")
        ],
        "inconclusive": [
            f"{r['model']}/{r['profile']}/{r['point_id']} {r['label']} {r['stat']}: "
            f"{r['rel_delta']:+.1%}"
            for r in cmp.metrics.to_dict("records")
            if r["verdict"] == INCONCLUSIVE
        ],
    }
    (out / "compare.json").write_text(json.dumps(res, indent=2))
    return res


def main_compare(a) -> int:
    if a.print_out_dir:
        print(default_out_dir(a.base, a.head))
        return 0
    res = run_compare(a.base, a.head, root=a.root, out=a.out, opts=from_args(CompareOptions, a))
    if res["forced"]:
        print(
            "WARNING: forced comparison of runs that are not comparable:\n  "
            + "\n  ".join(res["problems"])
        )
    for n in res["notes"]:
        print(f"NOTE: {n}")
    print(
        json.dumps(
            {
                k: res[k]
                for k in (
                    "kind",
                    "out",
                    "page",
                    "points",
                    "significant",
                    "inconclusive",
                    "protocol_differs",
                )
            },
            indent=2,
        )
    )
    return 0
