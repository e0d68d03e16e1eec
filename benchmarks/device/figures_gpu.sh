#!/usr/bin/env bash
# The GPU figures of issues 46 (function tools, constrained decoding) and 47 (the response store) on
# one GPU in one call, about 7 minutes; everything goes under OUT.
#   1. grammar compile / cached lookup / mask fill p50 (CPU, the real Qwen tokenizer)
#        -> OUT/grammar_speed.log
#   2. `qualflow bench engine --plan tools`: the pilot point (c64, ISL 1024, OSL 256) on the Task,
#      then required strict calls (and free strings) against no tools, c32 unconstrained beside c32
#      unconstrained / c32 constrained, and a new / cached schema's added TTFT, each alternated
#        -> OUT/<GPU model>/<date>-engine-tools.json, OUT/engine-tools.log
#   3. `qualflow bench server --mode store`: the pilot shape c64 through `qualflow serve` + AIPerf,
#      the response store off and on (SQLite), alternated over 2 rounds
#        -> OUT/<date>-store.json, OUT/store.log
# Each prints its figures beside the last committed run of the same GPU model in benchmarks/results.
#   bash benchmarks/device/figures_gpu.sh OUT
set -uo pipefail
OUT=${1:?OUT dir}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh || exit 1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
rc=0
echo "== grammar speed $(date +%T)"
timeout 60 python3 benchmarks/grammar_speed.py --repeats 20 2>&1 | tee "$OUT/grammar_speed.log" || rc=1
echo "== engine --plan tools $(date +%T)"
timeout 240 qualflow bench engine --plan tools --work /tmp/figs-engine --out "$OUT" \
  --prev benchmarks/results --min-seconds 3 --min-repeats 3 --engine-process off \
  --skip-hf --skip-correctness --skip-offline --skip-multiturn --skip-equality --deadline-s 200 \
  2>&1 | tee "$OUT/engine-tools.log" || rc=1
echo "== server --mode store $(date +%T)"
timeout 300 qualflow bench server --mode store --device cuda --work /tmp/figs-store --out "$OUT" \
  --results benchmarks/results --points 64 --isl 1024 --osl 256 --max-context 1536 \
  --requests 512 --store-rounds 2 2>&1 | grep -v '^{"status"' | tee "$OUT/store.log" || rc=1
echo "== done $(date +%T) rc=$rc"
exit $rc
