#!/usr/bin/env bash
# The server's speed against the Task's and against our own harness ceiling, per point, in one call.
# On a Qwen3-0.6B-shaped fp16 bundle (seeded random weights; the `tiny` preset on cpu), ISL/OSL 128,
# ignore_eos, greedy, --max-batch 64 --max-context 512 (MAX_CONTEXT). The Task samples greedily, so the
# AIPerf requests carry REQUEST_SAMPLING (default {"temperature":0}) beside ignore_eos and min_tokens: the
# server then does the Task's work. REQUEST_SAMPLING='{}' sends the server's default (temperature 1).
#   1. the Task alone (runtime.bench_point.run_point, one process) at each point;
#   2. `qualflow serve` + the published AIPerf (responses, streaming) at the same points;
#   3. the harness ceiling: `qualflow serve --engine synthetic --step-ms CEILING_STEP_MS` (same bundle,
#      tokenizer, HTTP path, timing records; no model) + the same AIPerf points.
# Prints Task, server and ceiling side by side per point, then this run against the newest committed
# result of the same device in benchmarks/results/<device>/ (or BASELINE=path), and writes
# OUT/<date>-server.json (NAME= to change it), ready to be committed in benchmarks/results/<device>/.
#
# MODE=scaling measures only the ceiling, at each AIPerf workers_max:record_processors pair of GRID and
# each point (default c64 and c256, SCALING_REQUESTS_PER_C (8) x c requests each, on the `tiny` preset's
# bundle: no model runs, and its tokenizer is the real one), and writes
# OUT/<date>-<device>-ceiling-scaling.json: the figures to set the pilot's `aiperf:` section from.
#
# On the lent GPU machine (torch there, not this project) the carried cp312 wheels in .whl/ are
# installed first (benchmarks/device/device_env.sh). Everything else comes from the environment:
#   DEVICE (cuda where nvidia-smi sees a GPU, else cpu), PRESET (qwen3-0.6b on cuda, tiny on cpu),
#   POINTS, ISL, OSL, MAX_BATCH, REQUESTS (per point, for the Task and the server alike; default c1 48, c64 2048, else 12c),
#   WORKERS / RECORD_PROCESSORS (AIPerf; 8 / 4 on cuda, 1 / 1 on cpu), CEILING_STEP_MS (1),
#   API_SERVERS (the stack's server's --api-server-count, 1) and CEILING_API_SERVERS (the ceiling's and
#   MODE=scaling's, default API_SERVERS): API processes in front of the one engine process,
#   SERVE_FLAGS (extra `qualflow serve` flags for the stack), REQUEST_SAMPLING (a JSON object of sampling fields), SKIP_TASK=1 (reuse WORK/task_level.json), SKIP_CEILING=1,
#   PROFILE=1 (the stack's server under the 10 ms sampling profiler: OUT/server_profile.txt), SPY_C=C (py-spy,
#   where it is on PATH, records the server and its engine process during point C for SPY_S (8) s after
#   SPY_DELAY_S (4) s: OUT/server_spy_c<C>.txt, collapsed stacks per thread, idle ones included; and each
#   thread's CPU share in the same window: OUT/server_threads_c<C>.json, benchmarks/profiling/thread_cpu.py), PORT.
#   bash benchmarks/server_speed.sh WORK_DIR OUT_DIR
set -euo pipefail
WORK=${1:-/tmp/qualflow-speed}; OUT=${2:-$WORK/out}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. benchmarks/device/device_env.sh
MODE=${MODE:-speed}
if [ -z "${DEVICE:-}" ]; then DEVICE=$(nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu); fi
if [ "$DEVICE" = cpu ]; then
  DEVICE_NAME=cpu; PRESET=${PRESET:-tiny}; MAX_BATCH=${MAX_BATCH:-8}; WORKERS=${WORKERS:-1}; RECORD_PROCESSORS=${RECORD_PROCESSORS:-1}
else
  DEVICE_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  [ "$MODE" = scaling ] && PRESET=${PRESET:-tiny}   # no model runs there: only the tokenizer matters
  PRESET=${PRESET:-qwen3-0.6b}; MAX_BATCH=${MAX_BATCH:-64}; WORKERS=${WORKERS:-8}; RECORD_PROCESSORS=${RECORD_PROCESSORS:-4}
fi
[ "$MODE" = scaling ] && POINTS=${POINTS:-"64 256"} || POINTS=${POINTS:-"1 64 256"}
ISL=${ISL:-128}; OSL=${OSL:-128}; MAX_CONTEXT=${MAX_CONTEXT:-512}; CEILING_STEP_MS=${CEILING_STEP_MS:-1}; PORT=${PORT:-8765}; SERVE_FLAGS=${SERVE_FLAGS:-}
API_SERVERS=${API_SERVERS:-1}; CEILING_API_SERVERS=${CEILING_API_SERVERS:-$API_SERVERS}; API_NOW=
REQUEST_SAMPLING=${REQUEST_SAMPLING:-'{"temperature":0}'}
EXTRA_INPUTS=$(python3 -c "import json,sys; print(json.dumps({'ignore_eos': True, 'min_tokens': int(sys.argv[1]), 'store': False, **json.loads(sys.argv[2])}, separators=(',', ':')))" "$OSL" "$REQUEST_SAMPLING")
GRID=${GRID:-"1:1 2:1 4:1 4:2 8:2 8:4 16:4 16:8"}; SCALING_REQUESTS_PER_C=${SCALING_REQUESTS_PER_C:-8}
TAG=$(python3 -c "import re,sys; print(re.sub(r'[^A-Za-z0-9]+', '-', sys.argv[1]).strip('-'))" "$DEVICE_NAME")
QF="python3 -m qualflow.cli"; PY="python3 $ROOT/benchmarks/server_speed.py"
BUNDLE=$WORK/bundle-$PRESET
mkdir -p "$WORK" "$OUT"
if [ ! -f "$BUNDLE/manifest.json" ]; then
  $QF embedded --out "$WORK/ckpt-$PRESET" --preset "$PRESET"
  $QF pin --checkpoint "$WORK/ckpt-$PRESET" --out "$WORK/pin-$PRESET.json"
  $QF build --pin "$WORK/pin-$PRESET.json" --profile fp16 --out "$BUNDLE" --force
fi
# at least ~5 s of steady state per point on the H200 (c1 ~8 s, c64 ~9 s, c256 ~12 s through the server)
requests() { if [ -n "${REQUESTS:-}" ]; then echo "$REQUESTS"; else case $1 in 1) echo 48;; 64) echo 2048;; *) echo $(( $1 * 12 ));; esac; fi; }
# the ceiling's synthetic engine holds every request of the largest point (it has no memory to run out of):
# queued behind the stack's batch, it would measure that batch, not the HTTP path and AIPerf
CEILING_BATCH=$(python3 -c "import sys; print(max(int(v) for v in sys.argv[1:]))" "$MAX_BATCH" $POINTS)

SETTINGS=$(python3 -c "import json,sys; k=sys.argv[1::2]; v=sys.argv[2::2]; print(json.dumps(dict(zip(k, v))))" \
  device "$DEVICE" device_name "$DEVICE_NAME" preset "$PRESET" isl "$ISL" osl "$OSL" max_batch "$MAX_BATCH" \
  aiperf_workers "$WORKERS" aiperf_record_processors "$RECORD_PROCESSORS" ceiling_step_ms "$CEILING_STEP_MS" ceiling_max_batch "$CEILING_BATCH" \
  serve_flags "$SERVE_FLAGS" request_sampling "$REQUEST_SAMPLING" mode "$MODE" \
  api_servers "$API_SERVERS" ceiling_api_servers "$CEILING_API_SERVERS")

SERVER=
SERVER_LOG=
stop_server() {   # with several API processes, each says at its stop how many requests it admitted (the spread)
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=
    grep -h "admitted [0-9]* requests" "$SERVER_LOG" 2>/dev/null || true; fi
}
trap stop_server EXIT
start_server() {   # start_server DIR API_PROCESSES [serve flags...]: one `qualflow serve` on PORT, timing log and log in DIR
  local dir=$1 api=$2; shift 2
  API_NOW=$api; SERVER_LOG=$dir/server.log
  mkdir -p "$dir"; rm -f "$dir/timing.jsonl"
  "${PROFILE_ENV[@]}" $QF serve --bundle "$BUNDLE" --device "$DEVICE" --port "$PORT" --model-name speed \
    --max-batch "$MAX_BATCH" --max-context "$MAX_CONTEXT" --timing-log "$dir/timing.jsonl" --log-level warning --api-server-count "$api" "$@" \
    > "$dir/server.log" 2>&1 &
  SERVER=$!
  until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
    kill -0 "$SERVER" 2>/dev/null || { echo "server died:"; tail -20 "$dir/server.log"; exit 1; }; sleep 1
  done
}
aiperf_point() {   # aiperf_point DIR C REQUESTS WORKERS RECORD_PROCESSORS: one AIPerf run into DIR/aiperf_c<C>
  local dir=$1 c=$2 n=$3 w=$4 rp=$5
  mkdir -p "$dir"
  env -u HF_HUB_OFFLINE aiperf profile --model speed --tokenizer "$BUNDLE" \
    --url "http://127.0.0.1:$PORT" --endpoint-type responses --streaming \
    --synthetic-input-tokens-mean "$ISL" --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean "$OSL" --output-tokens-stddev 0 \
    --extra-inputs "$EXTRA_INPUTS" \
    --random-seed 42 --num-dataset-entries 300 --dataset-sampling-strategy sequential \
    --concurrency "$c" --request-count "$n" --warmup-request-count $(( c < 8 ? 8 : c )) \
    --header "X-Qualflow-Phase:aiperf:c$c" \
    --workers-max "$w" --record-processors "$rp" --no-server-metrics --no-gpu-telemetry \
    --ui-type none --export-level records --artifact-dir "$dir/aiperf_c$c" > "$dir/aiperf_c$c.log" 2>&1 \
    || { tail -20 "$dir/aiperf_c$c.log"; exit 1; }
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], round(j['output_token_throughput']['avg']), 'tok/s')" \
    "$dir/aiperf_c$c/profile_export_aiperf.json" "$(basename "$dir") c$c ($API_NOW API processes):"
}
PROFILE_ENV=(env)

if [ "$MODE" = scaling ]; then
  rm -rf "$WORK/scaling"
  start_server "$WORK/scaling" "$CEILING_API_SERVERS" --engine synthetic --step-ms "$CEILING_STEP_MS" --device cpu --max-batch "$CEILING_BATCH"
  for pair in $GRID; do
    for C in $POINTS; do aiperf_point "$WORK/scaling/w${pair%%:*}_rp${pair##*:}" "$C" $(( C * SCALING_REQUESTS_PER_C )) "${pair%%:*}" "${pair##*:}"; done
  done
  stop_server
  $PY scaling "$WORK" "$OUT" "${NAME:-$(date -u +%F)-$TAG-ceiling-scaling.json}" "$GRID" $POINTS "$SETTINGS"
  exit 0
fi

# 1. the Task alone
TASK_POINTS=$(for C in $POINTS; do printf '%s:%s ' "$C" "$(requests "$C")"; done)
# shellcheck disable=SC2086
[ "${SKIP_TASK:-0}" = 1 ] && [ -f "$WORK/task_level.json" ] || $PY task "$WORK" "$BUNDLE" "$DEVICE" "$MAX_BATCH:$MAX_CONTEXT" "$ISL" "$OSL" $TASK_POINTS
# 2. the stack's server
rm -rf "$WORK/server" "$WORK/ceiling"
[ "${PROFILE:-0}" = 1 ] && PROFILE_ENV=(env PYTHONPATH="$ROOT/benchmarks/profiling:${PYTHONPATH:-}" QUALFLOW_SAMPLE_PROFILE="$OUT/server_profile.txt")
# shellcheck disable=SC2086
start_server "$WORK/server" "$API_SERVERS" $SERVE_FLAGS
curl -s "http://127.0.0.1:$PORT/health"; echo
SPIES=()   # the profilers' jobs: waited for before the server stops (a bare `wait` would wait for the server)
for C in $POINTS; do
  if [ "${SPY_C:-}" = "$C" ] && command -v py-spy >/dev/null; then   # the server's threads and its engine process
    (sleep "${SPY_DELAY_S:-4}"; python3 "$ROOT/benchmarks/profiling/thread_cpu.py" "$SERVER" "${SPY_S:-8}" "$OUT/server_threads_c$C.json" \
       > "$WORK/threads.log" 2>&1) &
    SPIES+=($!)
    (sleep "${SPY_DELAY_S:-4}"; py-spy record --pid "$SERVER" --subprocesses --threads --idle --nonblocking --rate 100 \
       --duration "${SPY_S:-8}" --format raw --output "$OUT/server_spy_c$C.txt" > "$WORK/spy.log" 2>&1) &
    SPIES+=($!)
  fi
  aiperf_point "$WORK/server" "$C" "$(requests "$C")" "$WORKERS" "$RECORD_PROCESSORS"
done
[ ${#SPIES[@]} -eq 0 ] || wait "${SPIES[@]}"
stop_server
PROFILE_ENV=(env)
# 3. the harness ceiling: the same points, the synthetic engine behind the same HTTP path (SKIP_CEILING=1: not run)
if [ "${SKIP_CEILING:-0}" != 1 ]; then
  start_server "$WORK/ceiling" "$CEILING_API_SERVERS" --engine synthetic --step-ms "$CEILING_STEP_MS" --device cpu --max-batch "$CEILING_BATCH"
  for C in $POINTS; do aiperf_point "$WORK/ceiling" "$C" "$(requests "$C")" "$WORKERS" "$RECORD_PROCESSORS"; done
  stop_server
fi
$PY report "$WORK" "$OUT" "${NAME:-$(date -u +%F)-server.json}" "${BASELINE:-}" $POINTS "$SETTINGS"
