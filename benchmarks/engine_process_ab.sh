#!/usr/bin/env bash
# The server with its engine in its own process against the engine as a thread of the server: on one
# machine and one bundle, benchmarks/server_speed.sh twice, `--engine-process on` first, then `off` (in-process; the
# default on cuda is now on, so both are spelled out)
# (reusing the first run's Task-level figures), within BUDGET_S seconds in all. Writes
# OUT/server_speed_engine_process.json, OUT/server_speed_in_process.json, OUT/task_level.json and logs.
#   bash benchmarks/engine_process_ab.sh WORK_DIR OUT_DIR [BUDGET_S]
set -uo pipefail
WORK=${1:-/tmp/qualflow-gpu}; OUT=${2:-benchmarks/results}; BUDGET=${3:-340}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
NAME=server_speed_engine_process.json SERVE_FLAGS="--engine-process on" timeout "$BUDGET" \
  bash "$HERE/server_speed.sh" "$WORK" "$OUT" > "$OUT/engine_process.log" 2>&1
echo "engine process: exit $? after ${SECONDS}s"; grep -E "^(Task|AIPerf|c[0-9])" "$OUT/engine_process.log"
cp "$WORK/task_level.json" "$OUT/" 2>/dev/null
SKIP_TASK=1 NAME=server_speed_in_process.json SERVE_FLAGS="--engine-process off" timeout $(( BUDGET - SECONDS > 1 ? BUDGET - SECONDS : 1 )) \
  bash "$HERE/server_speed.sh" "$WORK" "$OUT" > "$OUT/in_process.log" 2>&1
echo "in process: exit $? after ${SECONDS}s"; grep -E "^(AIPerf|c[0-9])" "$OUT/in_process.log"
