#!/usr/bin/env bash
# Issue 49's one-row GEMV on one lent GPU, in one call (~6 min on an H100/H200):
# 1. its own grid (benchmarks/kernels/gemv_tune.py): per projection of the Qwen3-0.6B decode step,
#    cuBLAS, the skinny GEMM, the GEMV's current setting (gemv.launch_for) and the grid's best ->
#    OUT/gemv-tune.json, OUT/gemv-tune.log;
# 2. `qualflow bench engine --plan gemv`: the skinny GEMM against the one-row GEMV for one-row decode
#    steps on the c1 points (ITL, c1 ISL 1024 TTFT), family correctness on cuda fp16 and greedy
#    equality with the skinny GEMM's output on "_gemv", each variant's decode-step figures (kernels
#    and GPU us per b1 step, the step over its weight-read floor), every point beside its roofline and
#    the last committed run of the GPU model; then the pair again in 5 rounds with both variants
#    loaded, alternated -> OUT/results/<GPU model>/<date>-engine-gemv.json, OUT/engine.log.
# [DEADLINE_S]: the bench's deadline (default 360).
#   bash benchmarks/device/gemv_gpu.sh OUT [DEADLINE_S]   # on the GPU
#   bash benchmarks/device/gemv_gpu.sh OUT --tiny         # step 2 on cpu, tiny model (1 is cuda only)
set -uo pipefail
OUT=${1:?OUT dir}; TINY=${2:-}; DEADLINE=360
case "$TINY" in ''|--tiny) ;; *) DEADLINE=$TINY; TINY= ;; esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh || exit 1
mkdir -p "$OUT"
if [ "$TINY" = "--tiny" ]; then
  ARGS=(--tiny --min-seconds 0.1 --min-repeats 1 --paired-rounds 2)
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
  ARGS=(--min-seconds 3 --min-repeats 3 --paired-rounds 5 --deadline-s "$DEADLINE")
  timeout 180 python3 benchmarks/kernels/gemv_tune.py --out "$OUT/gemv-tune.json" \
    > "$OUT/gemv-tune.log" 2>&1
  echo "gemv_tune exit $?" | tee -a "$OUT/gemv-tune.log"
fi
t0=$(date +%s)
qualflow bench engine --plan gemv --work /tmp/gemv-engine --out "$OUT/results" \
  --prev benchmarks/results --skip-hf --skip-multiturn --skip-agent-replay --skip-offline \
  --engine-process off \
  "${ARGS[@]}" 2>&1 | tee "$OUT/engine.log"
rc=${PIPESTATUS[0]}
echo "bench engine exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/engine.log"
exit "$rc"
