#!/usr/bin/env bash
# A thin caller of `qualflow bench server` (see its --help) for the device scripts: the environment
# settings of the older script (server_ab.sh runs an older tree's copy of this file the same way)
# become its flags. On the lent GPU machine, device_env.sh installs the carried wheels first.
#   [DEVICE= PRESET= POINTS= ISL= OSL= MAX_BATCH= MAX_CONTEXT= REQUESTS= WORKERS= RECORD_PROCESSORS=
#    CEILING_STEP_MS= API_SERVERS= CEILING_API_SERVERS= SERVE_FLAGS= REQUEST_SAMPLING= SKIP_TASK=1
#    SKIP_CEILING=1 BASELINE= NAME= MODE= GRID= SCALING_REQUESTS_PER_C= PORT=]
#   bash benchmarks/server_speed.sh WORK_DIR OUT_DIR
set -euo pipefail
WORK=${1:-/tmp/qualflow-speed}; OUT=${2:-$WORK/out}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh
args=(--work "$WORK" --out "$OUT")
for pair in DEVICE:device PRESET:preset POINTS:points ISL:isl OSL:osl MAX_BATCH:max-batch \
    MAX_CONTEXT:max-context REQUESTS:requests WORKERS:workers RECORD_PROCESSORS:record-processors \
    CEILING_STEP_MS:ceiling-step-ms API_SERVERS:api-servers CEILING_API_SERVERS:ceiling-api-servers \
    SERVE_FLAGS:serve-flags REQUEST_SAMPLING:request-sampling BASELINE:baseline NAME:name MODE:mode \
    GRID:grid SCALING_REQUESTS_PER_C:scaling-requests-per-c PORT:port; do
  var=${pair%%:*}
  if [ -n "${!var:-}" ]; then args+=("--${pair##*:}=${!var}"); fi
done
[ "${SKIP_TASK:-0}" = 1 ] && args+=(--skip-task)
[ "${SKIP_CEILING:-0}" = 1 ] && args+=(--skip-ceiling)
exec qualflow bench server "${args[@]}"
