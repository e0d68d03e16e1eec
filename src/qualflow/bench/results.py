"""The one schema of a committed benchmark result
(benchmarks/results/<GPU model>/<date>-<kind>.json).

    {"schema": "qualflow-bench/1",
     "kind": "engine" | "server" | "kernel" | "pilot" | "http" | "store",
     "name": what ran (engine: the plan; kernel: the tuner; server, pilot: the preset or config),
     "gpu": the device name as CUDA reports it ("NVIDIA H200"), "date": ISO 8601 UTC,
     "software": {"git_sha", "torch", "cuda", "driver"} (null where the run did not record it),
     "points": [{"name", "figures": {figure: value}, "roofline": {figure: limit} or {},
                 "share_of_roofline": figure / limit or null}],
     "detail": the run's own record, as the suite wrote it (what its comparisons read)}

A point's figures and roofline name their unit in the key (`output_tok_per_s`, `us`). The engine's
roofline is the point's own (roofline.py: weight and KV reads at the measured copy bandwidth, the
matmul peak); a kernel's is the copy bandwidth over the bytes it must read; the server's points set
the Task's and the harness ceiling's figures beside the server's, with no roofline. `gpu_dir` names
the folder of a GPU model; `record` wraps a run; `runs` reads the committed ones back."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

SCHEMA = "qualflow-bench/1"
KINDS = ("engine", "server", "kernel", "pilot", "http", "store")
# what a result recorded before a setting existed ran with: request_sampling came in after runs
# whose requests carried no sampling fields (the server's default, temperature 1); api_servers after
# runs of one API process
OLD_DEFAULTS = {"request_sampling": "{}", "api_servers": "1", "ceiling_api_servers": "1"}


def gpu_dir(gpu: str) -> str:
    """The folder of a GPU model: its name with each run of other characters as one dash."""
    return re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-")


def git_sha(root: Path | None = None) -> str | None:
    """The tree's commit (with `+` when it has uncommitted changes), or None outside a checkout."""
    root = root or Path(__file__).resolve().parent  # any folder of the checkout
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return sha + ("+" if dirty else "")


def point(
    name: str, figures: dict, roofline: dict | None = None, share: float | None = None
) -> dict:
    return {
        "name": name,
        "figures": figures,
        "roofline": roofline or {},
        "share_of_roofline": share,
    }


def engine_points(raw: dict) -> list[dict]:
    """The engine benchmark's points and offline workloads: output tok/s, TTFT and ITL p50 beside
    the point's roofline."""
    out = []
    for name, p in raw.get("points", {}).items():
        if "error" in p:
            continue
        limit = p.get("roofline", {}).get("limit_tok_per_s")
        out.append(
            point(
                name,
                {k: p.get(k) for k in ("output_tok_per_s", "ttft_ms_p50", "itl_ms_p50")},
                {"output_tok_per_s": limit} if limit else {},
                p["output_tok_per_s"] / limit if limit else None,
            )
        )
    for key in sorted(k for k in raw if k.startswith("offline") and "output_tok_per_s" in raw[k]):
        tps, limit = (
            raw[key]["output_tok_per_s"],
            raw[key].get("roofline", {}).get("limit_tok_per_s"),
        )
        out.append(
            point(
                key,
                {"output_tok_per_s": tps},
                {"output_tok_per_s": limit} if limit else {},
                tps / limit if limit else None,
            )
        )
    return out + constrained_points(raw.get("constrained", {}))


def constrained_points(raw: dict) -> list[dict]:
    """`--plan tools`'s figures (bench/constrained.py), one point each: required calls and free
    strings against no tools (output tok/s ratio), the shared batch (ITL p50, % slower), a new and
    a cached schema (added TTFT p50)."""
    t, m, s = (raw.get(k, {}) for k in ("tools_vs_none", "mixed_batch", "schema_latency"))
    figs = {
        "constrained_required_vs_none": {"ratio": t.get("required", {}).get("ratio")},
        "constrained_free_vs_none": {"ratio": t.get("free", {}).get("ratio")},
        "constrained_shared_batch": {"itl_slower_pct": m.get("slower_pct")},
        "constrained_new_schema": {"added_ttft_ms_p50": s.get("new", {}).get("added_ms_p50")},
        "constrained_cached_schema": {"added_ttft_ms_p50": s.get("cached", {}).get("added_ms_p50")},
    }
    return [point(n, f) for n, f in figs.items() if next(iter(f.values())) is not None]


def server_points(raw: dict) -> list[dict]:
    """The server benchmark's points: the server's, the Task's and the harness ceiling's output
    tok/s, ITL p50 and the client-minus-Task gap p50."""
    keys = (
        "server_output_tok_per_s",
        "task_output_tok_per_s",
        "ceiling_output_tok_per_s",
        "itl_ms_p50",
        "task_itl_ms_p50",
        "client_minus_task_ms_p50",
    )
    return [
        point(f"{k}_isl{raw.get('isl')}_osl{raw.get('osl')}", {f: raw[k].get(f) for f in keys})
        for k in sorted((k for k in raw if re.fullmatch(r"c\d+", k)), key=lambda k: int(k[1:]))
    ]


def http_points(raw: dict) -> list[dict]:
    """The HTTP path benchmark's servers: the p50 of HTTP in, queue, HTTP out and their sum."""
    keys = ("http_in_ms_p50", "queue_ms_p50", "http_out_ms_p50", "http_part_ms_p50")
    return [
        point(f"c1_{name}", {k: figs.get(k) for k in keys})
        for name, figs in raw.get("servers", {}).items()
    ]


def store_points(raw: dict) -> list[dict]:
    """The store A/B's points: each side's output tok/s, ITL and TTFT p50, and the on / off
    ratio of output tok/s (the median of the rounds')."""
    out = []
    for name, p in raw.get("points", {}).items():
        for side in ("off", "on"):
            out.append(point(f"{name}_store_{side}", dict(p[side])))
        out.append(point(f"{name}_store_on_off", {"ratio": p["ratio"]["ratio"]}))
    return out


def kernel_points(raw: dict) -> list[dict]:
    """A tuner's shapes: the best launch's time and its share of the copy bandwidth (the
    roofline)."""
    out = []
    for r in raw.get("shapes") or raw.get("results") or []:
        best = r.get("best") or min(r.get("grid", []), key=lambda g: g["us"], default=None)
        if not best:
            continue
        name = r.get("shape") or "_".join(
            f"{k}{r[k]}" for k in ("n", "k", "rows", "tokens") if k in r
        )
        if "shape" in r and "rows" in r:
            name += f"_rows{r['rows']}"
        launch = {
            k: v for k, v in best.items() if k not in ("us", "rel_err", "gbps", "share_of_copy")
        }
        share = best.get("share_of_copy")
        out.append(
            point(
                name,
                {"us": best["us"], "launch": launch},
                {"us": round(best["us"] * share, 3)} if share else {},
                share,
            )
        )
    return out


def pilot_points(raw: dict) -> list[dict]:
    """A pilot qualify's points: status, output tok/s, TTFT and ITL p50 through the whole stack,
    each beside its roofline where the evidence summary (`summary`, its rows by point_id) has
    one."""
    summary = {r["point_id"]: r for r in raw.get("summary", [])}
    out = []
    for row in raw["status"]:
        s = summary.get(row["point_id"], {})
        limit = s.get("roofline_output_token_throughput_tps")
        limit = limit if limit and limit == limit else None  # NaN: no roofline
        out.append(
            point(
                row["point_id"],
                {
                    "status": row["status"],
                    "output_tok_per_s": row["output_tps"],
                    "ttft_ms_p50": row["ttft_p50_ms"],
                    "itl_ms_p50": row["itl_p50_ms"],
                },
                {"output_tok_per_s": limit} if limit else {},
                row["output_tps"] / limit if limit and row["output_tps"] else None,
            )
        )
    return out


POINTS = {
    "engine": engine_points,
    "server": server_points,
    "kernel": kernel_points,
    "pilot": pilot_points,
    "http": http_points,
    "store": store_points,
}


def record(kind: str, name: str, gpu: str, date: str, software: dict, raw) -> dict:
    """A run in the schema: its points drawn from `raw`, which it keeps whole as `detail`."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    sw = {k: software.get(k) for k in ("git_sha", "torch", "cuda", "driver")}
    return {
        "schema": SCHEMA,
        "kind": kind,
        "name": name,
        "gpu": gpu,
        "date": date,
        "software": sw,
        "points": POINTS[kind](raw),
        "detail": raw,
    }


def write_run(kind: str, name: str, res: dict, path: Path) -> Path:
    """A server-side run (`res` with device_name and recorded_utc) written at `path` in the
    schema, with this tree's git sha; prints where."""
    rec = record(kind, name, res["device_name"], res["recorded_utc"], {"git_sha": git_sha()}, res)
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"\nwrote {path}")
    return path


def runs(root: Path, gpu: str | None = None, kind: str | None = None) -> list[tuple[Path, dict]]:
    """The committed runs under `root` (one folder per GPU model), oldest first; of one GPU model
    and kind where given. A file not in the schema is an error that names it."""
    out = []
    pattern = f"{gpu_dir(gpu)}/*.json" if gpu else "*/*.json"
    for p in sorted(Path(root).glob(pattern)):
        r = json.loads(p.read_text())
        if not isinstance(r, dict) or r.get("schema") != SCHEMA:
            raise ValueError(f"{p}: not a {SCHEMA} result")
        if kind is None or r["kind"] == kind:
            out.append((p, r))
    return sorted(out, key=lambda pr: (pr[1]["date"], pr[0].name))


def detail(r: dict) -> dict:
    """A run as the suite recorded it: a schema record's detail, or an uncommitted bare result."""
    return r["detail"] if r.get("schema") == SCHEMA else r
