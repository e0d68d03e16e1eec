"""Benchmark-only sampling profiler, loaded by Python at start when this folder is on PYTHONPATH and
QUALFLOW_SAMPLE_PROFILE names an output file: every QUALFLOW_SAMPLE_MS (default 10) it records each
thread's innermost frames; at exit it writes, per thread, the share of samples in each function
(self) and the busy share (samples not parked in a wait). Not part of qualflow."""

import atexit
import collections
import os
import sys
import threading
import time

_out = os.environ.get("QUALFLOW_SAMPLE_PROFILE")
_IDLE = {
    "wait",
    "select",
    "poll",
    "_run_once",
    "get",
    "acquire",
    "run_forever",
    "_worker",
    "sleep",
    "join",
    "_wait_for_tstate_lock",
    "__enter__",
}


def _start(path: str, every: float) -> None:
    selfc = collections.defaultdict(collections.Counter)
    stackc = collections.defaultdict(collections.Counter)
    total = collections.Counter()
    on = {"run": True, "since": 0.0}

    def name_of(tid):
        for t in threading.enumerate():
            if t.ident == tid:
                return t.name
        return str(tid)

    def loop():
        me = threading.get_ident()
        names, n_loop = {}, 0
        while on["run"]:
            time.sleep(every)
            n_loop += 1
            if n_loop % 300 == 0:  # uvicorn re-raises SIGTERM at exit, so atexit may never run
                dump()
            for tid, f in sys._current_frames().items():
                if tid == me:
                    continue
                n = names.get(tid) or names.setdefault(tid, name_of(tid))
                code = f.f_code
                key = f"{code.co_name} ({os.path.basename(code.co_filename)}:{f.f_lineno})"
                total[n] += 1
                selfc[n][key] += 1
                chain, g = [], f
                while g is not None and len(chain) < 4:
                    chain.append(g.f_code.co_name)
                    g = g.f_back
                stackc[n][" < ".join(chain)] += 1

    def dump():
        with open(path + ".tmp", "w") as fh:
            for n, cnt in total.most_common():
                idle = sum(c for k, c in selfc[n].items() if k.split(" ")[0] in _IDLE)
                fh.write(
                    f"== thread {n}: {cnt} samples, busy {100 * (cnt - idle) / max(cnt, 1):.1f}%\n"
                )
                for k, c in selfc[n].most_common(25):
                    fh.write(f"  {100 * c / cnt:5.1f}%  {k}\n")
                fh.write("  -- innermost 4 frames:\n")
                for k, c in stackc[n].most_common(15):
                    fh.write(f"  {100 * c / cnt:5.1f}%  {k}\n")
        os.replace(path + ".tmp", path)

    threading.Thread(target=loop, name="sampler", daemon=True).start()
    atexit.register(dump)


if _out and "serve" in sys.argv:  # the server only, not its compile workers
    _start(_out, float(os.environ.get("QUALFLOW_SAMPLE_MS", "10")) / 1000)
