#!/usr/bin/env bash
# A/B of the HTTP part of a c1 request (`qualflow bench server --mode http`: uvicorn and granian,
# the synthetic engine) on one machine: this tree against an older one, alternated (new, old, old,
# new, ...), one round of each server per run, on one bundle.
#   OLD_TAR  a `git archive` of the older tree (at least src/), e.g.
#            git archive --format=tar REV src benchmarks pyproject.toml > .whl/old.tar
# Each run writes OUT/<side>-<n>/<date>-http.json; OUT/http-ab.log has every run's lines, and the
# p50s over each side's runs come last.
#   [DEVICE=cuda] bash benchmarks/device/http_ab.sh OLD_TAR WORK OUT [REQUESTS=120] [PAIRS=2]
set -euo pipefail
OLD_TAR=$1; WORK=$2; OUT=$3; REQUESTS=${4:-120}; PAIRS=${5:-2}; DEVICE=${DEVICE:-cuda}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh
OLD=$WORK/old-tree
. benchmarks/device/old_tree.sh || exit 1
for n in $(seq 1 "$PAIRS"); do
  order="new old"; [ $((n % 2)) = 0 ] && order="old new"
  for side in $order; do
    if [ "$side" = new ]; then tree=$ROOT; else tree=$OLD; fi
    echo "== $side $n $(date +%T)" | tee -a "$OUT/http-ab.log"
    PYTHONPATH="${SITE}$tree/src" qualflow bench server --mode http --device "$DEVICE" \
      --work "$WORK/run" --out "$OUT/$side-$n" --http-requests "$REQUESTS" --http-rounds 1 2>&1 \
      | grep -v '^{"status"' >> "$OUT/http-ab.log"
  done
done
python3 - "$OUT" <<'PY' | tee -a "$OUT/http-ab.log"
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
for side in ("new", "old"):
    runs = [json.loads(p.read_text())["detail"] for p in sorted(out.glob(f"{side}-*/*-http.json"))]
    for server in sorted({s for r in runs for s in r["servers"]}):
        figs = [r["servers"][server] for r in runs if server in r["servers"]]
        cells = {k: statistics.median(f[k] for f in figs) for k in figs[0] if k.endswith("_p50")}
        print(side, server, len(figs), "runs:", " | ".join(f"{k.removesuffix('_ms_p50')} {v:.3f}" for k, v in cells.items()))
PY
