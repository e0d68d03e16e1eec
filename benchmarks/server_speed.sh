#!/usr/bin/env bash
# The server's share of the Task's throughput on the GPU. On a Qwen3-0.6B-shaped fp16 bundle (seeded
# random weights), ISL 128 / OSL 128, ignore_eos, greedy, --max-batch 64 --max-context 512:
#   1. the Task alone (runtime.bench_point.run_point, one process) at concurrency 1, 64 and 256;
#   2. `qualflow serve` + the published AIPerf (responses, streaming) at the same points.
# Prints and writes OUT/server_speed.json: both throughputs, their ratio, TTFT/ITL, and the
# client-minus-task-call gap (AIPerf request_latency - the record's public_task_call_wall) per point.
# With PROFILE=1 the server runs under a 10 ms sampling profiler (benchmarks/profiling): OUT/server_profile.txt.
# SERVE_FLAGS: extra `qualflow serve` flags (e.g. --engine-process off; on is the default on cuda); NAME: the result's file name in OUT
# (default server_speed.json); SKIP_TASK=1 reuses WORK/task_level.json from an earlier run on this machine.
#   bash benchmarks/server_speed.sh WORK_DIR OUT_DIR
set -euo pipefail
WORK=${1:-/tmp/qualflow-gpu}; OUT=${2:-benchmarks/results}; PORT=${PORT:-8765}
POINTS=${POINTS:-"1 64 256"}; SERVE_FLAGS=${SERVE_FLAGS:-}; NAME=${NAME:-server_speed.json}; MAX_BATCH=${MAX_BATCH:-64}; DEVICE=${DEVICE:-cuda}; PRESET=${PRESET:-qwen3-0.6b}
QF="python3 -m qualflow.cli"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK" "$OUT"
if [ ! -f "$WORK/bundle/manifest.json" ]; then
  $QF embedded --out "$WORK/ckpt" --preset $PRESET
  $QF pin --checkpoint "$WORK/ckpt" --out "$WORK/pin.json"
  $QF build --pin "$WORK/pin.json" --profile fp16 --out "$WORK/bundle" --force
fi
requests() { case $1 in 1) echo 16;; 64) echo 256;; *) echo $(( $1 * 4 ));; esac; }

# 1. the Task alone
[ "${SKIP_TASK:-0}" = 1 ] && [ -f "$WORK/task_level.json" ] || python3 - "$WORK" "$MAX_BATCH" "$DEVICE" $POINTS <<'PY'
import asyncio, json, sys
from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.bench_point import run_point
work, mb, points = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[4:]]
task = load_task(f"{work}/bundle", EngineConfig(device=sys.argv[3], max_batch=mb, max_context=512))
res = {"load_timing": task.load_timing}
try:
    asyncio.run(run_point(task, 64, 128, 16, 128))   # warm-up: every batch size's graph once
    for c in points:
        n = 16 if c == 1 else (256 if c == 64 else 4 * c)
        r = asyncio.run(run_point(task, c, 128, 128, n))
        res[f"c{c}"] = r
        print(f"Task c{c}: {r['output_tok_per_s']:.0f} tok/s  TTFT p50 {r['ttft_ms_p50']:.1f} ms  "
              f"ITL p50 {r['itl_ms_p50']:.2f} ms", flush=True)
finally:
    task.close()
json.dump(res, open(f"{work}/task_level.json", "w"), indent=2)
PY

# 2. through the server
rm -f "$WORK/timing.jsonl"
PROFILE_ENV=()
[ "${PROFILE:-0}" = 1 ] && PROFILE_ENV=(env PYTHONPATH="$HERE/profiling:${PYTHONPATH:-}" QUALFLOW_SAMPLE_PROFILE="$OUT/server_profile.txt")
"${PROFILE_ENV[@]}" $QF serve --bundle "$WORK/bundle" --device $DEVICE --port $PORT --model-name qwen3-0.6b-shape \
  --max-batch $MAX_BATCH --max-context 512 --timing-log "$WORK/timing.jsonl" --log-level warning $SERVE_FLAGS &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
  kill -0 $SERVER || { echo "server died"; exit 1; }; sleep 1
done
curl -s "http://127.0.0.1:$PORT/health"; echo
for C in $POINTS; do
  N=$(requests $C)
  env -u HF_HUB_OFFLINE aiperf profile --model qwen3-0.6b-shape --tokenizer "$WORK/bundle" \
    --url "http://127.0.0.1:$PORT" --endpoint-type responses --streaming \
    --synthetic-input-tokens-mean 128 --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean 128 --output-tokens-stddev 0 \
    --extra-inputs '{"ignore_eos":true,"min_tokens":128,"store":false}' \
    --random-seed 42 --num-dataset-entries 300 --dataset-sampling-strategy sequential \
    --concurrency $C --request-count $N --warmup-request-count $(( C < 8 ? 8 : C )) \
    --header "X-Qualflow-Phase:aiperf:c$C" \
    --workers-max 8 --record-processors 4 --no-server-metrics --no-gpu-telemetry \
    --ui-type none --export-level records --artifact-dir "$WORK/aiperf_c$C" > "$WORK/aiperf_c$C.log" 2>&1 \
    || { tail -20 "$WORK/aiperf_c$C.log"; exit 1; }
  python3 -c "import json,sys; j=json.load(open('$WORK/aiperf_c$C/profile_export_aiperf.json')); print('AIPerf c$C', round(j['output_token_throughput']['avg']), 'tok/s')"
done
python3 - "$WORK" "$OUT" "$NAME" "$SERVE_FLAGS" $POINTS <<'EOF'
import json, sys
from pathlib import Path
work, out, name, flags, points = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4], [int(c) for c in sys.argv[5:]]
rec = {r["request_id"]: r for r in map(json.loads, (work / "timing.jsonl").read_text().splitlines())}
task = json.loads((work / "task_level.json").read_text())
res = {"task_load_timing": task["load_timing"], "serve_flags": flags}
pct = lambda a, q: a[min(len(a) - 1, int(len(a) * q))] if a else None  # noqa: E731
for c in points:
    d = work / f"aiperf_c{c}"
    j = json.loads((d / "profile_export_aiperf.json").read_text())
    rows = [json.loads(l) for l in (d / "profile_export.jsonl").read_text().splitlines()]
    prof = [r for r in rows if r["metadata"].get("benchmark_phase") == "profiling"]
    gaps = sorted(r["metrics"]["request_latency"]["value"] - rec[r["metadata"]["x_request_id"]]["public_task_call_wall_ns"] / 1e6
                  for r in prof if r["metadata"]["x_request_id"] in rec and "request_latency" in r["metrics"])
    t = task[f"c{c}"]
    srv = j["output_token_throughput"]["avg"]
    res[f"c{c}"] = {"server_output_tok_per_s": srv, "task_output_tok_per_s": t["output_tok_per_s"],
                    "server_share_of_task": srv / t["output_tok_per_s"],
                    "ttft_ms_p50": j["time_to_first_token"]["p50"], "itl_ms_p50": j["inter_token_latency"]["p50"],
                    "task_ttft_ms_p50": t["ttft_ms_p50"], "task_itl_ms_p50": t["itl_ms_p50"],
                    "errors": j.get("error_request_count", {}).get("avg", 0), "requests": j["request_count"]["avg"],
                    "matched": len(gaps), "client_minus_task_ms_p50": pct(gaps, 0.5),
                    "client_minus_task_ms_p99": pct(gaps, 0.99)}
    r = res[f"c{c}"]
    print(f"c{c}: server {srv:.0f} tok/s / Task {t['output_tok_per_s']:.0f} = {100 * r['server_share_of_task']:.0f}%  "
          f"gap p50/p99 {r['client_minus_task_ms_p50']:.2f}/{r['client_minus_task_ms_p99']:.2f} ms  "
          f"TTFT {r['ttft_ms_p50']:.1f} ms  ITL {r['itl_ms_p50']:.2f} ms (Task {t['itl_ms_p50']:.2f})  "
          f"errors {r['errors']}  matched {r['matched']}/{r['requests']:.0f}")
(out / name).write_text(json.dumps(res, indent=2) + "\n")
EOF
