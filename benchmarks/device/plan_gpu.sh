#!/usr/bin/env bash
# One `qualflow bench engine --plan PLAN` on one lent GPU: the plan's variants on their points (no HF,
# multi-turn, agent-replay or offline runs, the engine in the bench's process), family correctness on
# the variant of record, every point beside its roofline and the last committed run of the GPU model.
# The result (kind engine) goes to OUT/results/<GPU model>/<date>-engine-PLAN.json, the log to
# OUT/engine.log. [DEADLINE_S]: the bench's deadline (default 420); further arguments go to the
# bench (e.g. --paired-rounds 5).
#   bash benchmarks/device/plan_gpu.sh PLAN OUT [DEADLINE_S] [BENCH FLAGS...]   # on the GPU
#   bash benchmarks/device/plan_gpu.sh PLAN OUT --tiny [BENCH FLAGS...]         # cpu, tiny model
set -uo pipefail
PLAN=${1:?PLAN}; OUT=${2:?OUT dir}; TINY=${3:-}; DEADLINE=420
shift $(( $# < 3 ? $# : 3 ))
case "$TINY" in ''|--tiny) ;; *) DEADLINE=$TINY; TINY= ;; esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh || exit 1
mkdir -p "$OUT"
if [ "$TINY" = "--tiny" ]; then
  ARGS=(--tiny --min-seconds 0.1 --min-repeats 1)
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
  ARGS=(--min-seconds 3 --min-repeats 3 --deadline-s "$DEADLINE")
fi
t0=$(date +%s)
qualflow bench engine --plan "$PLAN" --work "/tmp/$PLAN-engine" --out "$OUT/results" \
  --prev benchmarks/results --skip-hf --skip-multiturn --skip-agent-replay --skip-offline \
  --engine-process off \
  "${ARGS[@]}" "$@" 2>&1 | tee "$OUT/engine.log"
rc=${PIPESTATUS[0]}
echo "bench engine exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/engine.log"
exit "$rc"
