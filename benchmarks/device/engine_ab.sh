#!/usr/bin/env bash
# A/B of the engine on one machine: this tree against an older one (a `git archive` of it, at least
# src/ and pyproject.toml), alternated new, old, new, old, ... ROUNDS pairs, each side one
# `qualflow bench engine` with the same flags. Each run writes OUT/<side>-<n>/ (the result JSON of
# its plan) and OUT/<side>-<n>.log; OUT/engine-ab.log holds the order and the times.
#   bash benchmarks/device/engine_ab.sh OLD_TAR OUT [ROUNDS] -- BENCH ENGINE FLAGS...
# e.g. (function tools, with the pinned-mask commit reverted on the old side):
#   git archive --format=tar REV src benchmarks pyproject.toml > .whl/old.tar
#   bash benchmarks/device/engine_ab.sh .whl/old.tar OUT 1 -- --plan tools --engine-process off \
#     --skip-hf --skip-correctness --skip-offline --skip-multiturn --skip-equality
# On the lent GPU machine the carried wheels (.whl/) serve both trees.
set -uo pipefail
OLD_TAR=$1; OUT=$2; ROUNDS=1
shift 2
if [ "${1:-}" != "--" ]; then ROUNDS=$1; shift; fi
[ "${1:-}" = "--" ] && shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh || exit 1
OLD=/tmp/engine-ab-old
. benchmarks/device/old_tree.sh || exit 1
rc=0
for n in $(seq 1 "$ROUNDS"); do
  for side in new old; do
    if [ "$side" = new ]; then tree=$ROOT; else tree=$OLD; fi
    echo "== round $n $side $(date +%T)" | tee -a "$OUT/engine-ab.log"
    PYTHONPATH="${SITE}$tree/src" python3 -m qualflow.cli bench engine --work "/tmp/engine-ab-$side" \
      --out "$OUT/$side-$n" --prev "$ROOT/benchmarks/results" "$@" > "$OUT/$side-$n.log" 2>&1 || rc=1
    tail -n 25 "$OUT/$side-$n.log" | tee -a "$OUT/engine-ab.log"
  done
done
echo "== done $(date +%T) rc=$rc" | tee -a "$OUT/engine-ab.log"
exit $rc
