#!/usr/bin/env bash
# Issue 49's one-row GEMV on one lent GPU, in one call (at most ~9 min: the grid is cut at 4 min):
# 1. its own grid (benchmarks/kernels/gemv_tune.py): per projection of the Qwen3-0.6B decode step,
#    cuBLAS, the skinny GEMM, the GEMV's current setting (gemv.launch_for) and the grid's best ->
#    OUT/gemv-tune.json, OUT/gemv-tune.log (cuda only);
# 2. `qualflow bench engine --plan gemv` (plan_gpu.sh): the skinny GEMM against the one-row GEMV for
#    one-row decode steps, and that with the RMSNorm before qkv and gate_up inside it ("_gemv_norm"),
#    on the c1 points (ITL, c1 ISL 1024 TTFT), family correctness on cuda fp16 on "_gemv_norm",
#    greedy equality with the skinny GEMM's output on both, each variant's decode-step figures
#    (kernels and GPU us per b1 step, the step over its weight-read floor), every point beside its
#    roofline and the last committed run of the GPU model; then the pairs again in 5 rounds with
#    both variants loaded, alternated -> OUT/results/<GPU model>/<date>-engine-gemv.json, OUT/engine.log.
#   bash benchmarks/device/gemv_gpu.sh OUT [DEADLINE_S]   # on the GPU (the bench's deadline: 300)
#   bash benchmarks/device/gemv_gpu.sh OUT --tiny         # step 2 on cpu, tiny model
set -uo pipefail
OUT=${1:?OUT dir}; MODE=${2:-300}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
if [ "$MODE" != "--tiny" ]; then
  cd "$ROOT" && . benchmarks/device/device_env.sh || exit 1  # exported: plan_gpu.sh reuses it
  mkdir -p "$OUT"
  timeout 240 python3 benchmarks/kernels/gemv_tune.py --out "$OUT/gemv-tune.json" \
    > "$OUT/gemv-tune.log" 2>&1
  echo "gemv_tune exit $?" | tee -a "$OUT/gemv-tune.log"
fi
ROUNDS=5; [ "$MODE" = "--tiny" ] && ROUNDS=2
exec bash "$HERE/plan_gpu.sh" gemv "$OUT" "$MODE" --paired-rounds "$ROUNDS"
