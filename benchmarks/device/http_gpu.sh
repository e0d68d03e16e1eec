#!/usr/bin/env bash
# The HTTP part of a c1 request under uvicorn and under granian, on the lent GPU machine's CPU (the
# synthetic engine: no model), alternated in one call with repeats (`qualflow bench server --mode
# http`); the result (kind http) goes to OUT/<date>-http.json and the log to OUT/http.log.
#   bash benchmarks/device/http_gpu.sh OUT [REQUESTS] [ROUNDS]
set -uo pipefail
OUT=${1:?OUT dir}; REQUESTS=${2:-100}; ROUNDS=${3:-4}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh || exit 1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
nproc | tee -a "$OUT/gpu.txt"
qualflow bench server --mode http --work /tmp/http --out "$OUT" --device cuda \
  --http-requests "$REQUESTS" --http-rounds "$ROUNDS" 2>&1 | grep -v '^{"status"' | tee "$OUT/http.log"
