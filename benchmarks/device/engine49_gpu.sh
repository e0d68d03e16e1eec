#!/usr/bin/env bash
# Issue 49 on one lent GPU, in one call (~4-5 min on an H100/H200): `qualflow bench engine --plan
# hopper`: prefill attention through flash varlen ("_flash") against fresh steps of at most
# --extend-kernel-tokens through the extend kernel ("_extend", family correctness on cuda fp16 at the
# unchanged thresholds runs on it, its greedy output is checked against _flash's) on c1 ISL 1024
# TTFT and the pilot shape (c64, ISL 1024 / OSL 256); each variant's decode-step figures (kernels
# and GPU us per b1 step, the step over its weight-read floor) and prefill attention; every point
# beside its roofline and the last committed run of the GPU model. The result (kind engine) goes to
# OUT/results/<GPU model>/<date>-engine-hopper.json, the log to OUT/engine.log. [DEADLINE_S]: the
# bench's deadline (default 420).
#   bash benchmarks/device/engine49_gpu.sh OUT [DEADLINE_S]   # on the GPU
#   bash benchmarks/device/engine49_gpu.sh OUT --tiny     # the same commands on cpu, tiny model
set -uo pipefail
OUT=${1:?OUT dir}; TINY=${2:-}; DEADLINE=420
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
qualflow bench engine --plan hopper --work /tmp/e49-engine --out "$OUT/results" \
  --prev benchmarks/results --skip-hf --skip-multiturn --skip-agent-replay --skip-offline \
  --engine-process off \
  "${ARGS[@]}" 2>&1 | tee "$OUT/engine.log"
rc=${PIPESTATUS[0]}
echo "bench engine exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/engine.log"
exit "$rc"
