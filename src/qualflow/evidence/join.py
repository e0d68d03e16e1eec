"""The request-level join of AIPerf client records with the server's Task timing records, and the
evidence tables (requests, summary, correctness, protocol, runs). Every client record and every
server record ends up in exactly one `requests` row: matched, client-only or server-only."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd

from qualflow.aiperf import exports
from qualflow.aiperf.command import load_points
from qualflow.aiperf.terminal import Terminal, read_terminals
from qualflow.evidence.schema import SCHEMA_VERSION, SUMMARY_METRICS, SUMMARY_PERCENTILES, TABLES, conform
from qualflow.evidence import slo as slo_mod
from qualflow.evidence.status import accounting_ok, qualification_status, slo_ok
from qualflow.evidence.store import HISTORY
from qualflow.phases import PROFILING, PROTOCOL, WARMUP, parse_point_key, parse_tag, point_key
from qualflow.server.timing import TimingRecord, read_timing_log
from qualflow.session.run import repeat_run_id, run_id_of

NS_MS = 1e6
SERVER_TIMING_UNAVAILABLE = ("server timing not available (external endpoint): accounted on the client side only "
                             "(every AIPerf record once, no errors, each stream's terminal event checked); "
                             "requests rows are client-only by design")


def _ms(v):
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else v / NS_MS


def _server_cols(s: TimingRecord | None) -> dict:
    if not s:
        return {}
    return {
        "server_response_id": s.response_id, "server_tag": s.tag, "server_status": s.status,
        "server_http_status": s.http_status, "server_error": s.error, "server_stream": s.stream,
        "finish_reason": s.finish_reason, "server_input_tokens": s.input_tokens,
        "server_output_tokens": s.output_tokens,
        "server_http_received_ns": s.http_received_ns, "server_http_sent_ns": s.http_sent_ns,
        "server_submitted_ns": s.submitted_ns, "server_first_scheduled_ns": s.first_scheduled_ns,
        "server_first_token_ns": s.first_token_ns, "server_finished_ns": s.finished_ns,
        "server_queue_wait_ms": _ms(s.queue_wait_ns), "server_prefill_ms": _ms(s.prefill_ns),
        "server_decode_ms": _ms(s.decode_ns),
        "public_task_call_wall_ms": _ms(s.public_task_call_wall_ns),
    }


_SOURCE = {PROFILING: "aiperf", WARMUP: "session-warmup", PROTOCOL: "protocol-check"}


def _phase_of_tag(tag: str | None) -> tuple[str, str | None, str]:
    """(phase, point_id, source) for a server-only record."""
    phase, point = parse_tag(tag)
    return (phase, point, _SOURCE[phase]) if phase else ("unknown", None, "unknown")


def match(client_rows: list[dict], server_records: list[TimingRecord]) -> list[dict]:
    """Outer join on request id in which every record of either side is in exactly one row. Client
    and server records of one id pair up in order (matched); what is left over stands alone
    (client-only / server-only). Every row of an id that has more than one record on a side is
    flagged `duplicate_request_id`, which fails accounting for its point."""
    servers: dict[str, list[TimingRecord]] = {}
    for s in server_records:
        servers.setdefault(s.request_id, []).append(s)
    n_client: dict[str, int] = {}
    for c in client_rows:
        n_client[c["request_id"]] = n_client.get(c["request_id"], 0) + 1
    dup = {rid for rid, n in n_client.items() if n > 1} | {rid for rid, ss in servers.items() if len(ss) > 1}
    unpaired = {rid: list(ss) for rid, ss in servers.items()}
    rows = []
    for c in client_rows:
        rid = c["request_id"]
        row = {**c, "duplicate_request_id": rid in dup}
        if unpaired.get(rid):
            row.update(_server_cols(unpaired[rid].pop(0)), match_status="matched")
        else:
            row["match_status"] = "client-only"
        rows.append(row)
    for rid, left in unpaired.items():
        for s in left:
            phase, key, source = _phase_of_tag(s.tag)
            point, repeat = parse_point_key(key) if key else (None, 1)
            rows.append({"request_id": rid, "phase": phase, "point_id": point, "source": source, "_repeat": repeat,
                         "is_warmup": phase == WARMUP, "match_status": "server-only",
                         "duplicate_request_id": rid in dup, **_server_cols(s)})
    return rows


def _derive(df: pd.DataFrame) -> pd.DataFrame:
    def col(c):
        return pd.to_numeric(df[c], errors="coerce") if c in df else pd.Series(np.nan, index=df.index)
    df["client_e2e_ms"] = (col("client_request_end_ns") - col("client_request_start_ns")) / NS_MS
    df["server_http_ms"] = (col("server_http_sent_ns") - col("server_http_received_ns")) / NS_MS
    df["client_to_server_ms"] = (col("server_http_received_ns") - col("client_request_start_ns")) / NS_MS
    df["client_minus_task_wall_ms"] = df["client_e2e_ms"] - col("public_task_call_wall_ms")
    df["client_latency_minus_task_wall_ms"] = col("client_request_latency_ms") - col("public_task_call_wall_ms")
    return df


def _terminal_cols(terminals: dict | None, request_id: str, client_error: str | None) -> dict:
    """With a raw export, each request's terminal event; a bad one is the request's client error."""
    if terminals is None:
        return {"client_error": client_error}
    t = terminals.get(request_id) or Terminal(None, "no raw export record: terminal event unknown")
    err = client_error or (json.dumps({"type": "TerminalEventError", "message": t.error}) if t.error else None)
    return {"client_error": err, "client_terminal_event": t.event}


def aiperf_client_rows(point_id: str, artifact_dir: Path, rel_dir: str, repeat: int = 1) -> list[dict]:
    inputs = exports.read_inputs(artifact_dir)
    outputs = exports.read_outputs(artifact_dir)
    terminals = read_terminals(artifact_dir)
    rows = []
    for r in exports.read_records(artifact_dir):
        warm = r["benchmark_phase"] == "warmup"
        key = (r["conversation_id"], r["turn_index"] or 0)
        text = exports.payload_text(inputs.get(key))
        out = outputs.get(r["request_id"])
        rows.append({
            "request_id": r["request_id"], "point_id": point_id, "phase": WARMUP if warm else PROFILING,
            "source": "aiperf", "is_warmup": warm, "_repeat": repeat,
            "client_request_start_ns": r["request_start_ns"], "client_request_end_ns": r["request_end_ns"],
            "client_request_latency_ms": r["request_latency"], "client_ttft_ms": r["time_to_first_token"],
            "client_ttst_ms": r["time_to_second_token"], "client_itl_ms": r["inter_token_latency"],
            "client_decode_ms": r["decode_duration"], "client_isl": r["input_sequence_length"],
            "client_osl": r["output_sequence_length"], "client_osl_mismatch_pct": r["osl_mismatch_diff_pct"],
            **_terminal_cols(terminals, r["request_id"], r["client_error"]),
            "input_sha256": exports.sha256_text(text),
            "input_artifact": f"{rel_dir}/inputs.json#{key[0]}/{key[1]}" if text is not None else None,
            "output_sha256": exports.sha256_text(out), "output_chars": None if out is None else len(out),
            "output_artifact": f"{rel_dir}/outputs.json#{r['request_id']}" if out is not None else None,
        })
    return rows


def session_client_rows(session_dir: Path) -> list[dict]:
    rows = []
    wp = session_dir / "warmup.parquet"
    if wp.exists():
        for w in pd.read_parquet(wp).to_dict("records"):
            rows.append({"request_id": w["request_id"], "point_id": None, "phase": WARMUP,
                         "source": "session-warmup", "is_warmup": True,
                         "client_request_start_ns": w["client_start_ns"], "client_request_end_ns": w["client_end_ns"],
                         "client_error": w["error"]})
    pp = session_dir / "protocol.parquet"
    if pp.exists():
        for p in pd.read_parquet(pp).to_dict("records"):
            rows.append({"request_id": p["request_id"], "point_id": None, "phase": PROTOCOL,
                         "source": "protocol-check", "is_warmup": False,
                         "client_error": None if p["passed"] else f"check {p['name']} failed"})
    return rows


def _pct(s: pd.Series, q: float):
    s = pd.to_numeric(s, errors="coerce").dropna()
    return None if s.empty else float(np.percentile(s, q))


def summarize_point(req: pd.DataFrame, point: dict, run_json: dict, summary_json: dict | None,
                    goodput: dict | None = None, payloads_sha: str | None = None) -> dict:
    pid = point["point_id"]
    mine = req[(req["point_id"] == pid) & (req["phase"] == "profiling")]
    matched = mine[mine["match_status"] == "matched"]
    err = mine["client_error"].notna() | mine["server_error"].notna()
    exact_osl = point.get("ignore_eos", True) and not point.get("osl_stddev", 0)
    srv_osl = pd.to_numeric(matched["server_output_tokens"], errors="coerce")
    n_osl_wrong = int((srv_osl != point["osl"]).sum()) if exact_osl else 0
    rate = point.get("request_rate")
    row = {
        "point_id": pid, "workload": point.get("workload"), "concurrency": point.get("concurrency"),
        "load_kind": "concurrency" if rate is None else "request_rate", "request_rate": rate,
        "arrival_pattern": point.get("arrival_pattern", "poisson") if rate is not None else None,
        "isl": point.get("isl"), "osl": point["osl"],
        "request_count": point["request_count"],
        "n_client": int((mine["match_status"] != "server-only").sum()),
        "n_server": int((mine["match_status"] != "client-only").sum()),
        "n_matched": len(matched),
        "n_client_only": int((mine["match_status"] == "client-only").sum()),
        "n_server_only": int((req[(req["point_id"] == pid)]["match_status"] == "server-only").sum()),
        "duplicate_request_ids": ", ".join(sorted(set(
            req[(req["point_id"] == pid) & req["duplicate_request_id"].astype(bool)]["request_id"].astype(str)))) or None,
        "n_errors": int(err.sum()),
        "n_server_osl_mismatch": n_osl_wrong,
        "aiperf_warnings": "; ".join(run_json.get("verdict", {}).get("warnings", [])) or None,
        "n_warmup_excluded": int(((req["point_id"] == pid) & req["is_warmup"].astype(bool)).sum()),
        "aiperf_ok": bool(run_json.get("verdict", {}).get("ok", False)),
        "aiperf_reasons": "; ".join(run_json.get("verdict", {}).get("reasons", [])) or None,
        "dataset_sha256": run_json.get("dataset_sha256"),
        "input_file_sha256": run_json.get("input_file_sha256"),
        "error_rate": float(err.sum()) / max(int(point["request_count"]), 1),
        "goodput_fraction": slo_mod.goodput_fraction(mine, point["request_count"], goodput or {}),
        "payloads_sha256": payloads_sha,
    }
    if summary_json:
        def avg(tag):
            b = summary_json.get(tag)
            return b.get("avg") if isinstance(b, dict) else None
        row["benchmark_duration_s"] = avg("benchmark_duration")
        row["request_throughput_rps"] = avg("request_throughput")
        row["output_token_throughput_tps"] = avg("output_token_throughput")
        good = avg("good_request_count")
        row["aiperf_goodput_fraction"] = None if good is None or not point.get("goodput") else \
            float(good) / max(int(point["request_count"]), 1)
    for m in SUMMARY_METRICS:
        vals = pd.to_numeric(matched[m], errors="coerce") if m in matched else pd.Series(dtype=float)
        row[f"{m}_mean"] = None if vals.dropna().empty else float(vals.mean())
        for q in SUMMARY_PERCENTILES:
            row[f"{m}_p{q}"] = _pct(vals, q)
    return row


def session_failure(session: dict) -> str | None:
    """The session's recorded failure as one reason, naming the stage, exception type and message."""
    err = session.get("error")
    if not err:
        return None
    if isinstance(err, dict):
        return f"session failed in {err.get('stage')}: {err.get('type')}: {err.get('message')}"
    return f"session failed: {err}"


def _iso(ns):
    return None if ns is None else dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).isoformat()


def _load_json(p: Path) -> dict:
    return json.loads(p.read_text()) if p.exists() else {}


def build_evidence(*, session_dir, correctness, bundle_dir, pin, model, profile, software_key, out,
                   points: list[dict], expected_thresholds_version: str | None = None,
                   commands: dict | None = None, device: str | None = None, slos: dict | None = None) -> dict:
    session_dir, out = Path(session_dir), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    session = _load_json(session_dir / "session.json")
    startup = _load_json(session_dir / "startup.json")
    prov = _load_json(session_dir / "provenance.json")
    manifest = _load_json(Path(bundle_dir) / "manifest.json") if bundle_dir else {}
    pin_d = _load_json(Path(pin)) if pin else {}
    started = session.get("session_started_ns")
    run_id = session.get("run_id") or run_id_of(model, profile, started or 0)
    key = {"schema_version": SCHEMA_VERSION, "run_id": run_id, "software_key": software_key,
           "model": model, "profile": profile}

    client = session_client_rows(session_dir)
    for p in points:
        for k in range(1, int(p.get("repeats", 1)) + 1):
            adir = session_dir / "points" / point_key(p["point_id"], k) / "aiperf"
            client += aiperf_client_rows(p["point_id"], adir, str(adir), repeat=k)
    server = read_timing_log(session_dir / "server_timing.jsonl")
    req = pd.DataFrame(match(client, server))
    for c in TABLES["requests"]:
        if c not in req:
            req[c] = None
    req = _derive(req)
    repeat = pd.to_numeric(req["_repeat"], errors="coerce").fillna(1).astype(int) if "_repeat" in req \
        else pd.Series(1, index=req.index)
    for k, v in key.items():
        req[k] = v
    req["run_id"] = [repeat_run_id(run_id, int(x)) for x in repeat]
    req = conform(req.drop(columns=["_repeat"], errors="ignore"), "requests")

    corr = pd.read_parquet(correctness) if correctness and Path(correctness).exists() else pd.DataFrame()
    for k, v in key.items():
        corr[k] = v
    corr = conform(corr, "correctness")
    proto = pd.read_parquet(session_dir / "protocol.parquet") if (session_dir / "protocol.parquet").exists() \
        else pd.DataFrame(columns=["name", "passed", "detail", "request_id"])
    for k, v in key.items():
        proto[k] = v
    proto = conform(proto, "protocol")

    failure = session_failure(session)
    endpoint = session.get("stack") == "endpoint"
    if endpoint:   # implemented = reachable, and /v1/models names the model
        implemented = bool(startup.get("healthy_ns")) and bool((startup.get("health") or {}).get("serves_model"))
        implemented_reasons = [failure] if failure and not implemented else \
            ([] if implemented else ["endpoint not reachable or not serving the model"])
    else:
        implemented = bool(manifest) and bool(startup.get("healthy_ns"))
        implemented_reasons = ([] if manifest else [f"no bundle manifest in {bundle_dir}"]) + \
            ([failure] if failure and not startup.get("healthy_ns") else [])
    settings = session.get("settings") or {}
    protocol_enabled = settings.get("protocol_checks", True)
    summaries, runs, targets = [], [], []
    manifest_small = {k: v for k, v in manifest.items() if k not in ("files",)}
    ckpt = pin_d.get("checkpoint") if isinstance(pin_d.get("checkpoint"), dict) else {"id": pin_d.get("checkpoint")}
    slos = slos or {}
    for p in points:
        reps = []     # per repeat: (run id, summary row, run.json, status args)
        for k in range(1, int(p.get("repeats", 1)) + 1):
            rid = repeat_run_id(run_id, k)
            pdir = session_dir / "points" / point_key(p["point_id"], k)
            run_json = _load_json(pdir / "run.json")
            srow = summarize_point(req[req["run_id"] == rid], p, run_json, exports.read_summary(pdir / "aiperf"),
                                   goodput=slo_mod.goodput_bounds(slos.get(p["point_id"])),
                                   payloads_sha=exports.payloads_sha256(pdir / "aiperf"))
            srow.update(repeat=k, repeats=int(p.get("repeats", 1)))
            acc_ok, acc_reasons = accounting_ok(srow, server_timing=not endpoint)
            args = dict(
                implemented=implemented, implemented_reasons=implemented_reasons, correctness=corr,
                protocol=proto, protocol_enabled=protocol_enabled, aiperf_ok=srow["aiperf_ok"] and not failure,
                aiperf_reasons=run_json.get("verdict", {}).get("reasons", ["AIPerf did not run"]),
                accounting_ok=acc_ok, accounting_reasons=acc_reasons,
                expected_thresholds_version=expected_thresholds_version,
                client_pin_reasons=session.get("client_pin_reasons") or [])
            reps.append((rid, srow, run_json, args))
        # the SLOs over every repeat of the point; judged only when every repeat is qualified
        below = []
        for rid, _, _, args in reps:
            st, why = qualification_status(**args, slo=(True, []))
            if st != "slo-met":
                below.append(f"run {rid} is {st} ({'; '.join(why)})")
        figs, misses, configured = slo_mod.evaluate([r[1] for r in reps], slos.get(p["point_id"]))
        rung = slo_ok(configured, misses, below)
        rids = [r[0] for r in reps]
        for f in figs:
            targets.append({**key, "point_id": p["point_id"], "workload": p.get("workload"),
                            "load_kind": reps[0][1]["load_kind"],
                            "load": p.get("request_rate") if p.get("request_rate") is not None else p.get("concurrency"),
                            **f.row(), "repeat_run_ids": json.dumps(rids)})
        for rid, srow, run_json, args in reps:
            status, reasons = qualification_status(**args, slo=rung)
            if failure and failure not in reasons:
                reasons.append(failure)
            if endpoint:
                reasons.append(SERVER_TIMING_UNAVAILABLE)
            srow["status"] = status
            rkey = {**key, "run_id": rid}
            summaries.append({**rkey, **srow})
            runs.append({
                **rkey, "point_id": p["point_id"], "status": status, "status_reasons": "; ".join(reasons) or None,
                "qualflow_version": prov.get("qualflow_version"), "git_sha": prov.get("git_sha"),
                "git_dirty": prov.get("git_dirty"), "packages": json.dumps(prov.get("packages"), sort_keys=True),
                "python": prov.get("python"), "os": prov.get("os"),
                "hardware": json.dumps(prov.get("hardware"), sort_keys=True),
                "checkpoint": ckpt.get("id"),
                "checkpoint_revision": ckpt.get("revision") or f"content-sha256:{ckpt.get('content_sha256')}",
                "pin": json.dumps(pin_d, sort_keys=True, default=str)[:100000],
                "bundle_hash": manifest.get("bundle_hash"),
                "bundle_manifest": json.dumps(manifest_small, sort_keys=True, default=str)[:100000],
                "stack": session.get("stack") or "qualflow",
                "server_timing": session.get("server_timing") or "available",
                "served_model": session.get("model_name"),
                "device": None if endpoint else (device or session.get("device")),
                "precision": manifest.get("precision") or manifest.get("dtype") or manifest.get("profile"),
                "context_limit": manifest.get("context_limit"),
                "generation_config": json.dumps(manifest.get("generation_config"), sort_keys=True, default=str),
                "dataset_sha256": run_json.get("dataset_sha256"), "seed": p.get("seed"),
                "input_file_sha256": run_json.get("input_file_sha256"),
                "endpoint": (session.get("url") or "") + "/v1/responses", "streaming": p.get("streaming", True),
                "server_settings": json.dumps(session.get("settings") or {}, sort_keys=True),
                "gpu": json.dumps({**session["gpu"], "other_jobs": session.get("other_gpu_jobs", [])}, sort_keys=True)
                if session.get("gpu") else None,
                "workload": json.dumps(p, sort_keys=True),
                "startup": json.dumps({k: startup.get(k) for k in ("load_s", "server_startup_s", "startup_s",
                                                                   "warmup_s", "warmup_requests")}),
                "stage_times": json.dumps({k: v.get("wall_s") for k, v in session.get("stages", {}).items()}),
                "commands": json.dumps({"server": session.get("server_command"), "aiperf": run_json.get("command"),
                                        **(commands or {})}, default=str),
                "started_utc": _iso(started), "ended_utc": _iso(session.get("session_ended_ns")),
            })
    summ = conform(pd.DataFrame(summaries), "summary") if summaries else conform(pd.DataFrame(), "summary")
    runs_df = conform(pd.DataFrame(runs), "runs") if runs else conform(pd.DataFrame(), "runs")
    targ = conform(pd.DataFrame(targets), "targets") if targets else conform(pd.DataFrame(), "targets")
    run_ids = list(dict.fromkeys([run_id, *runs_df["run_id"]]))
    per_run = {rid: _run_tables(rid, run_id, req, summ, corr, proto, runs_df, targ) for rid in run_ids}
    tables = {t: pd.concat([per_run[r][t] for r in run_ids], ignore_index=True) for t in TABLES}
    for name, df in tables.items():
        write_table(df, out / f"{name}.parquet")
    for rid, tabs in per_run.items():   # every run also kept under out/history/<run_id>/ (never overwritten)
        dest = out / HISTORY / rid
        dest.mkdir(parents=True, exist_ok=True)
        for name, df in tabs.items():
            write_table(df, dest / f"{name}.parquet")
    return {"run_id": run_id, "run_ids": run_ids,
            "statuses": {r["point_id"]: r["status"] for r in runs if r["run_id"] == run_id},
            "counts": {n: len(d) for n, d in tables.items()}}


def _run_tables(rid, session_run_id, req, summ, corr, proto, runs, targ) -> dict[str, pd.DataFrame]:
    """The tables of one run id: its own requests, summary and runs rows; the session's correctness
    and protocol results (a repeat run carries them under its own id, so it stands alone); the
    across-repeat targets only with the session's run id."""
    def own(df):
        return df[df["run_id"] == rid].reset_index(drop=True)
    return {"requests": own(req), "summary": own(summ), "runs": own(runs),
            "correctness": corr.assign(run_id=rid), "protocol": proto.assign(run_id=rid),
            "targets": own(targ) if rid == session_run_id else targ.iloc[0:0]}


def write_table(df: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    df = df.copy()
    for c in df.columns:  # object columns holding mixed python values: store as strings
        if df[c].dtype == object and df[c].map(lambda v: isinstance(v, (dict, list))).any():
            df[c] = df[c].map(lambda v: None if v is None else json.dumps(v, default=str))
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"qualflow_evidence_schema_version"] = SCHEMA_VERSION.encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def main_join(a) -> int:
    points = load_points(a.points)
    commands = json.loads(a.commands) if a.commands else None
    res = build_evidence(session_dir=a.session, correctness=a.correctness, bundle_dir=a.bundle, pin=a.pin,
                         model=a.model, profile=a.profile, software_key=a.software_key, out=a.out,
                         points=points, expected_thresholds_version=a.thresholds_version,
                         commands=commands, device=a.device, slos=json.loads(a.slo) if a.slo else None)
    print(json.dumps(res, indent=2))
    return 0
