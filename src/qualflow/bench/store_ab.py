"""`qualflow bench server --mode store` (issue 47): the same AIPerf points with the response store
off and on (SQLite), alternated in one call.

Two `qualflow serve` run side by side on the same bundle: without a store on --port, and with
`--store sqlite:///<work>/store/responses.db` on --port + 1 (idle while the other is measured).
Each round runs every point on both (off, on; the next round on, off), the same requests on both
(no `store` field: the store side keeps every response by default, written before its terminal
event, and the other stores nothing). Prints per point the median output tok/s of each side, the
median of the rounds' ratios on / off (target >= 0.95) with its spread, and ITL / TTFT p50,
beside the newest committed store run of the same device in --results; writes
<out>/<date>-store.json (kind store) and the count of responses the database holds."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import sqlite3
import statistics
from pathlib import Path

from . import paired
from . import results as results_schema
from .config import ServerBenchConfig
from .server_procs import Server, aiperf_point

TARGET = 0.95
SIDES = ("off", "on")


def _figures(folder: Path, c: int) -> dict:
    j = json.loads((folder / f"aiperf_c{c}" / "profile_export_aiperf.json").read_text())
    return {
        "output_tok_per_s": j["output_token_throughput"]["avg"],
        "itl_ms_p50": j["inter_token_latency"]["p50"],
        "ttft_ms_p50": j["time_to_first_token"]["p50"],
    }


def _servers(cfg: ServerBenchConfig, bundle: Path, work: Path, db: Path) -> dict[str, Server]:
    flags = ["--device", cfg.device]
    servers = {"off": Server(cfg, bundle, work / "off", cfg.max_batch, cfg.api_servers, flags)}
    try:
        servers["on"] = Server(
            cfg,
            bundle,
            work / "on",
            cfg.max_batch,
            cfg.api_servers,
            [*flags, "--store", f"sqlite:///{db}"],
            port=cfg.port + 1,
        )
    except Exception:
        servers["off"].stop()
        raise
    return servers


def point_summary(rounds: list[dict], c: int) -> dict:
    """One point's sides over the rounds: medians, and the on / off ratio of output tok/s."""
    by = {s: [r[s] for r in rounds if r["c"] == c] for s in SIDES}
    out = {s: {k: statistics.median(f[k] for f in by[s]) for k in by[s][0]} for s in SIDES if by[s]}
    tps = {s: [f["output_tok_per_s"] for f in by[s]] for s in SIDES}
    out["ratio"] = paired.judged(paired.paired(tps["off"], tps["on"]), "ratio", at_least=TARGET)
    return out


def stored_responses(db: Path) -> int | None:
    if not db.exists():
        return None
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM responses").fetchone()[0]


def store_ab(cfg: ServerBenchConfig, bundle: Path, points: list[int], sets: dict, n_req) -> dict:
    """Both sides, alternated over --store-rounds rounds; the run's record. `n_req(c)`: requests
    per point."""
    work = Path(cfg.work) / "store"
    shutil.rmtree(work, ignore_errors=True)
    db = work / "responses.db"
    servers = _servers(cfg, bundle, work, db)
    ports = {"off": cfg.port, "on": cfg.port + 1}
    rounds: list[dict] = []
    try:
        for n in range(cfg.store_rounds):
            for c in points:
                row: dict = {"round": n, "c": c}
                for side in SIDES if n % 2 == 0 else SIDES[::-1]:
                    folder = work / f"{side}-{n}"
                    side_cfg = dataclasses.replace(cfg, port=ports[side])
                    procs = (cfg.workers, cfg.record_processors)
                    aiperf_point(side_cfg, bundle, folder, c, n_req(c), procs)
                    row[side] = _figures(folder, c)
                rounds.append(row)
    finally:
        for s in servers.values():
            s.stop()
    return {
        "recorded_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **sets,
        "store_rounds": cfg.store_rounds,
        "rounds": rounds,
        "points": {f"c{c}": point_summary(rounds, c) for c in points},
        "stored_responses": stored_responses(db),
    }


def previous(root: Path, res: dict) -> dict:
    """The newest committed store run of this device with the same ISL and OSL ({} if none)."""
    found = results_schema.runs(root, res["device_name"], "store")
    same = lambda d: (d.get("isl"), d.get("osl")) == (res["isl"], res["osl"])  # noqa: E731
    return next((r["detail"] for _, r in reversed(found) if same(r["detail"])), {})


def print_store(res: dict, prev: dict) -> None:
    print(
        f"\nresponse store on (SQLite) against off, ISL {res['isl']} OSL {res['osl']}, "
        f"{res['store_rounds']} rounds alternated; {res['stored_responses']} responses stored"
    )
    print(
        f"  {'point':<6}{'off tok/s':>11}{'on tok/s':>11}{'on/off':>8}{'[min, max]':>16}"
        f"{'previous':>10}{'ITL p50 off/on ms':>20}{'TTFT p50 off/on ms':>21}  target  met"
    )
    for name, p in res["points"].items():
        r, before = p["ratio"], prev.get("points", {}).get(name, {}).get("ratio", {}).get("ratio")
        spread = f"[{r['ratio_min']:.3f}, {r['ratio_max']:.3f}]"
        itl = f"{p['off']['itl_ms_p50']:.2f}/{p['on']['itl_ms_p50']:.2f}"
        ttft = f"{p['off']['ttft_ms_p50']:.1f}/{p['on']['ttft_ms_p50']:.1f}"
        prev_s = "-" if before is None else f"{before:.3f}"
        tps = f"{p['off']['output_tok_per_s']:>11.0f}{p['on']['output_tok_per_s']:>11.0f}"
        print(
            f"  {name:<6}{tps}{r['ratio']:>8.3f}{spread:>16}{prev_s:>10}{itl:>20}{ttft:>21}"
            f"  >= {TARGET}  {r['met']}"
        )


def write(res: dict, out: str, name: str) -> Path:
    default = f"{dt.datetime.now(dt.UTC).date()}-store.json"
    run = f"sqlite-isl{res['isl']}-osl{res['osl']}"
    return results_schema.write_run("store", run, res, Path(out, name or default))
