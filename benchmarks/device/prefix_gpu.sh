#!/usr/bin/env bash
# The prefix cache's GPU figures (issue 48) in one call: `qualflow bench engine --plan prefix` on the
# Qwen3-0.6B shape (seeded random weights):
#   - the single-turn points with the prefix cache on and off (nothing shared: a cache that finds
#     nothing must cost nothing);
#   - the multi-turn point: 6 turns to 4,416 prompt tokens, the last turn's TTFT with the cache on
#     (its prefill past the cached prefix replays a graph padded to a token and a context bucket),
#     on with that step eager (--prefill-graph-context 0: the path before, the A/B), and off; the
#     path and host/device time of that step on each side; and on with the context gathered for
#     the varlen kernel (--extend-attention gather: the path before the extend kernel);
#   - the agent-replay point: the recorded agent sessions (workloads/agent/agent-v1.json) at c16,
#     the cache on and off: throughput, TTFT p50, the hit rate beside the trace's maximum.
# First the extend kernel's own figures (benchmarks/kernels/extend_tune.py: $OUT/extend_tune.json).
# Writes $OUT/<GPU model>/<date>-engine-prefix.json, $OUT/bench.log and $OUT/prefix_summary.json.
#   bash benchmarks/device/prefix_gpu.sh OUT [more bench flags]     (--tiny: a CPU smoke run)
set -uo pipefail
OUT=${1:?OUT dir}; shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh || exit 1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  | tee "$OUT/gpu.txt"
# the extend kernel against the gathered context + flash varlen, over its launch settings
timeout 150 python3 benchmarks/kernels/extend_tune.py --out "$OUT/extend_tune.json" \
  > "$OUT/extend_tune.log" 2>&1; echo "extend_tune exit $?"; head -n 6 "$OUT/extend_tune.log"
t0=$(date +%s)
timeout 400 qualflow bench engine --plan prefix --work /tmp/qf-prefix --out "$OUT" \
  --prev benchmarks/results --skip-hf --skip-correctness --skip-offline --engine-process off \
  --min-seconds 2 --min-repeats 2 "$@" 2>&1 | tee "$OUT/bench.log"
rc=${PIPESTATUS[0]}
echo "bench exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/bench.log"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
found = sorted(out.glob("*/*-engine-prefix*.json"), key=lambda p: p.stat().st_mtime)
if not found:
    sys.exit("no engine-prefix result under " + str(out))
d = json.loads(found[-1].read_text())["detail"]
mt, ag = d.get("multiturn") or {}, d.get("agent_replay") or {}
summary = {"result": str(found[-1]), "gpu": d.get("gpu")}
SIDES = [s for s in ("on", "on_eager", "on_gather", "off") if s in mt]
if mt:
    summary["multiturn"] = {
        "prompt_tokens": mt["prompt_tokens"],
        "cached_tokens": mt["on"]["last_turn"][0]["cached_tokens"],
        **{f"ttft_ms_p50_{s}": mt[s]["ttft_ms_p50"] for s in SIDES},
        **{f"extend_attention_{s}": mt[s].get("extend_attention") for s in SIDES},
        **{k: v for k, v in mt.items() if k.startswith("ttft_ratio")},
        **{f"last_prefill_{s}": mt[s]["last_prefill"] for s in SIDES},
    }
if ag:
    summary["agent_replay"] = {
        "concurrency": ag["concurrency"],
        "requests": ag["on"]["requests"],
        **{f"output_tok_per_s_{s}": ag[s]["output_tok_per_s"] for s in ("on", "off")},
        "throughput_ratio_on_off": ag["throughput_ratio_on_off"],
        **{f"ttft_ms_p50_{s}": ag[s]["ttft_ms_p50"] for s in ("on", "off")},
        "hit_rate": ag["on"]["hit_rate"],
        "max_hit_rate": ag["on"]["max_hit_rate"],
        "hit_share_of_max": ag["on"]["hit_share_of_max"],
        "prefill_paths_on": ag["on"]["prefill_paths"],
    }
summary["problems"] = d.get("problems")
(out / "prefix_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
print(json.dumps(summary, indent=1))
PY
exit $rc
