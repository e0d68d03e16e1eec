#!/usr/bin/env bash
# The pilot qualify on a GPU machine that has torch but not this project installed (the lent H200):
# installs the carried wheels (.whl/, cp312) into /tmp/site, puts a `qualflow` launcher on PATH, runs
#   snakemake --cores all qualify --configfile CONFIG --config software_key=KEY
# and writes the status table, the summary (JSON), the run in the results schema (kind pilot, each
# point beside its roofline: OUT/<date>-pilot.json, for benchmarks/results/<GPU model>/) and the
# logs to OUT.
#   bash benchmarks/device/pilot_gpu.sh OUT [CONFIG] [KEY]
set -uo pipefail
OUT=${1:?OUT dir}; CONFIG=${2:-config/pilot-embedded-0.6b.yaml}; KEY=${3:-pilot-gpu}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh || exit 1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
SNAKEFILE=$( [ -f workflow/Snakefile ] && echo workflow/Snakefile || echo Snakefile )
t0=$(date +%s)
python3 -m snakemake -s "$SNAKEFILE" --cores all qualify --configfile "$CONFIG" --config software_key="$KEY" \
  > "$OUT/snakemake.log" 2>&1
rc=$?
echo "snakemake exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/snakemake.log"
cp results/status/"$KEY".tsv "$OUT/status.tsv" 2>/dev/null
python3 - "$KEY" "$OUT" "$CONFIG" <<'PY'
import datetime as dt, json, sys
from pathlib import Path
import pandas as pd
from qualflow.bench.results import git_sha, record
key, out, config = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]).stem
ROOFLINE = ["point_id", "roofline_output_token_throughput_tps", "share_of_roofline", "roofline_gpu"]
res = {}
for d in Path("results/evidence", key).glob("*/*"):
    s = pd.read_parquet(d / "summary.parquet")
    r = pd.read_parquet(d / "runs.parquet")
    res[f"{d.parent.name}/{d.name}"] = {
        "status": r[["point_id", "status", "status_reasons"]].to_dict("records"),
        "startup": json.loads(r["startup"].iloc[0]), "summary": s.drop(columns=["schema_version"]).to_dict("records")}
(out / "pilot.json").write_text(json.dumps(res, indent=2, default=str))
status = pd.read_csv(out / "status.tsv", sep="\t") if (out / "status.tsv").exists() else pd.DataFrame()
rows = [r for v in res.values() for r in v["summary"]]
summary = pd.DataFrame(rows).reindex(columns=ROOFLINE) if rows else pd.DataFrame(columns=ROOFLINE)
raw = {"software_key": key,
       "status": json.loads(status.to_json(orient="records")),
       "summary": json.loads(summary.to_json(orient="records")),
       "startup": next((v["startup"] for v in res.values()), None)}
gpu = (out / "gpu.txt").read_text().split(",")[0].strip()
now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
rec = record("pilot", config, gpu, now, {"git_sha": git_sha(Path.cwd())}, raw)
(out / f"{now[:10]}-pilot.json").write_text(json.dumps(rec, indent=1) + "\n")
for name, v in res.items():
    for row in v["summary"]:
        print(f"{name} {row['point_id']}: {row['status']}  {row['output_token_throughput_tps'] or 0:.0f} tok/s  "
              f"TTFT p50 {row['client_ttft_ms_p50'] or 0:.1f} ms  ITL p50 {row['client_itl_ms_p50'] or 0:.2f} ms  "
              f"queue p50 {row['server_queue_wait_ms_p50'] or 0:.1f} ms  gap p50 {row['client_minus_task_wall_ms_p50'] or 0:.1f} ms"
              + (f"  harness ceiling {row['ceiling_output_token_throughput_tps']:.0f} tok/s, share {row['share_of_ceiling']:.0%}"
                 if row.get("share_of_ceiling") is not None and row["share_of_ceiling"] == row["share_of_ceiling"] else "")
              + (f"  roofline {row['roofline_output_token_throughput_tps']:.0f} tok/s ({row.get('roofline_gpu')}), "
                 f"share {row['share_of_roofline']:.1%}" if (row.get("share_of_roofline") or 0) > 0
                 else f"  no roofline: {row.get('roofline_reasons')}"))
        if row.get("reasoning_effort"):
            print(f"  reasoning {row['reasoning_effort']}: first answer token p50 {row.get('client_ttfot_ms_p50') or 0:.1f} ms "
                  f"(server {row.get('server_ttfat_ms_p50') or 0:.1f} ms), reasoning tokens mean "
                  f"{row.get('server_reasoning_tokens_mean') or 0:.0f} (AIPerf {row.get('client_reasoning_tokens_mean') or 0:.0f}), "
                  f"answer tokens mean {row.get('server_answer_tokens_mean') or 0:.0f}")
PY
tar czf "$OUT/logs.tgz" logs results/session/"$KEY"/*/*/session.json results/session/"$KEY"/*/*/server.log 2>/dev/null
exit $rc
