#!/usr/bin/env bash
# Our server and `transformers serve` side by side on a lent GPU machine (torch 2.11 and transformers
# 5.17 there, not this project, no network), in one command that ends within PEER_DEADLINE_S
# (default 570 s; the device tool allows 600):
#  1. checks the carried wheels (.whl/, cp312; `python3 benchmarks/device/device_wheels.py fill` fills it
#     here) and installs them into /tmp/site (transformers 5.24 among them), with a `qualflow`
#     launcher on PATH;
#  2. snakemake --cores all qualify --configfile CONFIG --config software_key=KEY, interrupted (as a
#     Ctrl-C would) when the deadline nears, so that what ran is still written;
#  3. qualflow compare, base our server, head the peer;
#  4. writes to OUT (8 files, what the device tool brings back): status.tsv, summary.json (each
#     stack's points and the ratios: benchmarks/device/peer_summary.py, whose table ends the output),
#     compare.html, compare.json, compare.tgz (the whole comparison), logs.tgz (job logs, session
#     records, evidence), run.log (all of this output), gpu.txt.
#   bash benchmarks/device/peer_gpu.sh [--dry-run] [--no-install] OUT [KEY] [CONFIG]
# --dry-run: check the wheels, print the commands, dry-run the DAG (snakemake -n) and stop.
# --no-install: run in this environment as it is (no .whl/).
set -uo pipefail
DRY=0 INSTALL=1
while [ $# -gt 0 ]; do
  case $1 in --dry-run) DRY=1 ;; --no-install) INSTALL=0 ;; *) break ;; esac
  shift
done
OUT=${1:?usage: peer_gpu.sh [--dry-run] [--no-install] OUT [KEY] [CONFIG]}
KEY=${2:-peer-gpu}; CONFIG=${3:-config/peer-transformers-gpu.yaml}
DEADLINE_S=${PEER_DEADLINE_S:-570}; RESERVE_S=40   # compare, summary and archives after snakemake
T0=$(date +%s)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/run.log") 2>&1

SMK=(python3 -m snakemake --cores all qualify --configfile "$CONFIG" --config "software_key=$KEY")
CMP=results/compare/stacks-$KEY
echo "peer_gpu: $(date -u +%FT%TZ) key $KEY, config $CONFIG, deadline ${DEADLINE_S}s"
if [ "$INSTALL" = 1 ]; then
  python3 benchmarks/device/device_wheels.py check || exit 1
fi
if [ "$DRY" = 1 ]; then
  echo "peer_gpu: would run: ${SMK[*]}"
  echo "peer_gpu: then: qualflow compare --base results/evidence/$KEY/<our model>/<profile>" \
       "--head results/evidence/$KEY/<peer model>/endpoint --root results/evidence --out $CMP"
  "${SMK[@]}" -n > "$OUT/dry-run.log" 2>&1 || { tail -30 "$OUT/dry-run.log"; exit 1; }
  grep -E "^(aiperf_profile|family_correctness|build_bundle|total) " "$OUT/dry-run.log" | awk '!seen[$0]++'
  exit 0
fi

if [ "$INSTALL" = 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$ROOT/src PATH=/tmp/site/bin:$PATH
  mkdir -p /tmp/qf-bin
  printf '#!/bin/sh\nexec python3 -m qualflow.cli "$@"\n' > /tmp/qf-bin/qualflow && chmod +x /tmp/qf-bin/qualflow
  export PATH=/tmp/qf-bin:$PATH
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor}
python3 -c 'import transformers, aiperf, snakemake, qualflow; print("peer_gpu: transformers", transformers.__version__,
  "at", transformers.__file__)' || exit 1
echo "peer_gpu: transformers CLI: $(command -v transformers)"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
fi

BUDGET=$(( DEADLINE_S - RESERVE_S - ($(date +%s) - T0) ))
[ "$BUDGET" -ge 60 ] || BUDGET=60   # `timeout 0` would mean no limit
echo "peer_gpu: ${SMK[*]} (stopped after ${BUDGET}s)"
timeout -s INT -k 30 "$BUDGET" "${SMK[@]}"
rc=$?
echo "peer_gpu: snakemake exit $rc after $(( $(date +%s) - T0 )) s from the start"

cp "results/status/$KEY.tsv" "$OUT/status.tsv" 2>/dev/null || echo "peer_gpu: no status table (results/status/$KEY.tsv)"
OURS=$(ls -d results/evidence/"$KEY"/*/* 2>/dev/null | grep -v '/endpoint$' | head -1)
PEER=$(ls -d results/evidence/"$KEY"/*/endpoint 2>/dev/null | head -1)
if [ -n "$OURS" ] && [ -n "$PEER" ]; then
  qualflow compare --base "$OURS" --head "$PEER" --root results/evidence --out "$CMP" \
    && cp "$CMP/compare.html" "$CMP/compare.json" "$OUT/" && tar czf "$OUT/compare.tgz" -C "$(dirname "$CMP")" "$(basename "$CMP")"
else
  echo "peer_gpu: no comparison: evidence of our server '${OURS}', of the peer '${PEER}'"
fi
tar czf "$OUT/logs.tgz" logs results/evidence/"$KEY" results/session/"$KEY"/*/*/session.json \
  results/session/"$KEY"/*/*/server.log 2>/dev/null
python3 benchmarks/device/peer_summary.py "$KEY" "$OUT" || { [ "$rc" = 0 ] && rc=1; }
echo "peer_gpu: done after $(( $(date +%s) - T0 )) s"
exit $rc
