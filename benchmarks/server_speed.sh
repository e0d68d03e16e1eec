#!/usr/bin/env bash
# Through the server on the GPU: `qualflow serve` on a Qwen3-0.6B-shaped fp16 bundle, then the
# published AIPerf (responses, streaming, ignore_eos) at concurrency 1 and 64, ISL 128 / OSL 128.
# Prints AIPerf's output tok/s, TTFT, ITL and the client-minus-task gap per point.
#   bash benchmarks/server_speed.sh WORK_DIR OUT_DIR
set -euo pipefail
WORK=${1:-/tmp/qualflow-gpu}; OUT=${2:-benchmarks/results}; PORT=8765
mkdir -p "$WORK" "$OUT"
if [ ! -f "$WORK/bundle/manifest.json" ]; then
  qualflow embedded --out "$WORK/ckpt" --preset qwen3-0.6b
  qualflow pin --checkpoint "$WORK/ckpt" --out "$WORK/pin.json"
  qualflow build --pin "$WORK/pin.json" --profile fp16 --out "$WORK/bundle" --force
fi
rm -f "$WORK/timing.jsonl"
qualflow serve --bundle "$WORK/bundle" --device cuda --port $PORT --model-name qwen3-0.6b-shape \
  --max-batch 64 --max-context 512 --timing-log "$WORK/timing.jsonl" --log-level warning &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
  kill -0 $SERVER || { echo "server died"; exit 1; }; sleep 1
done
curl -s "http://127.0.0.1:$PORT/health"; echo
for C in 1 64; do
  N=$(( C == 1 ? 16 : 256 ))
  env -u HF_HUB_OFFLINE aiperf profile --model qwen3-0.6b-shape --tokenizer "$WORK/bundle" \
    --url "http://127.0.0.1:$PORT" --endpoint-type responses --streaming \
    --synthetic-input-tokens-mean 128 --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean 128 --output-tokens-stddev 0 \
    --extra-inputs '{"ignore_eos":true,"min_tokens":128,"store":false}' \
    --random-seed 42 --num-dataset-entries 300 --dataset-sampling-strategy sequential \
    --concurrency $C --request-count $N --warmup-request-count 8 --header "X-Qualflow-Phase:aiperf:c$C" \
    --workers-max 8 --record-processors 4 --no-server-metrics --no-gpu-telemetry \
    --ui-type none --export-level records --artifact-dir "$WORK/aiperf_c$C" > "$WORK/aiperf_c$C.log" 2>&1 \
    || { tail -20 "$WORK/aiperf_c$C.log"; exit 1; }
done
python3 - "$WORK" "$OUT" <<'EOF'
import json, sys, statistics as st
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
rec = {r["request_id"]: r for r in map(json.loads, (work / "timing.jsonl").read_text().splitlines())}
res = {}
for c in (1, 64):
    d = work / f"aiperf_c{c}"
    j = json.loads((d / "profile_export_aiperf.json").read_text())
    rows = [json.loads(l) for l in (d / "profile_export.jsonl").read_text().splitlines()]
    prof = [r for r in rows if r["metadata"].get("benchmark_phase") == "profiling"]
    gaps = sorted(r["metrics"]["request_latency"]["value"] - rec[r["metadata"]["x_request_id"]]["public_task_call_wall_ns"] / 1e6
                  for r in prof if r["metadata"]["x_request_id"] in rec)
    res[f"c{c}"] = {"output_tok_per_s": j["output_token_throughput"]["avg"],
                    "ttft_ms_p50": j["time_to_first_token"]["p50"], "itl_ms_p50": j["inter_token_latency"]["p50"],
                    "errors": j.get("error_request_count", {}).get("avg", 0), "requests": j["request_count"]["avg"],
                    "matched": len(gaps), "client_minus_task_ms_p50": gaps[len(gaps) // 2],
                    "client_minus_task_ms_p99": gaps[int(len(gaps) * 0.99) - 1]}
    print(f"AIPerf c{c}: {res[f'c{c}']}")
(out / "server_speed.json").write_text(json.dumps(res, indent=2) + "\n")
EOF
