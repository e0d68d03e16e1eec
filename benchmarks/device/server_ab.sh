#!/usr/bin/env bash
# A/B of the server on one machine: this tree against an older one, alternated (new, old, new, old, ...),
# each run one `benchmarks/server_speed.sh` (a thin caller of `qualflow bench server`) on the same
# bundle and work folder.
#   OLD_TAR   a `git archive` of the older tree (at least src/, benchmarks/, pyproject.toml), e.g.
#             git archive --format=tar REV src benchmarks pyproject.toml > .whl/old.tar
#   RUNS      "POINTS:tag;POINTS:tag;...": one pair per entry, in order (default "1 64 256:all;1:c1")
#   DEADLINE_S  no new pair starts after this many seconds (default 400)
# Each run writes OUT/server-ab-<tag>-{new,old}.json (server_speed.sh's figures; SKIP_CEILING=1 unless
# set) and OUT/server-ab.log; server_speed's other settings come from the environment as usual.
# On the lent GPU machine the carried wheels (.whl/) serve both trees.
#   bash benchmarks/device/server_ab.sh OLD_TAR WORK OUT
set -euo pipefail
OLD_TAR=$1; WORK=$2; OUT=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh
OLD=$WORK/old-tree
. benchmarks/device/old_tree.sh || exit 1
RUNS=${RUNS:-"1 64 256:all;1:c1"}; DEADLINE_S=${DEADLINE_S:-400}; export SKIP_CEILING=${SKIP_CEILING:-1}
start=$(date +%s)
IFS=';' read -r -a entries <<< "$RUNS"
for entry in "${entries[@]}"; do
  points=${entry%%:*}; tag=${entry##*:}
  if [ $(( $(date +%s) - start )) -gt "$DEADLINE_S" ]; then
    echo "server_ab: past ${DEADLINE_S}s, $tag not run" | tee -a "$OUT/server-ab.log"; continue
  fi
  for side in new old; do
    if [ "$side" = new ]; then tree=$ROOT; else tree=$OLD; fi
    echo "== $tag $side (POINTS=$points) $(date +%T)" | tee -a "$OUT/server-ab.log"
    PYTHONPATH="${SITE}$tree/src" POINTS="$points" NAME="server-ab-$tag-$side.json" \
      bash "$tree/benchmarks/server_speed.sh" "$WORK/run" "$OUT" >> "$OUT/server-ab.log" 2>&1
    qualflow bench server --brief "$OUT/server-ab-$tag-$side.json" || true
  done
done
