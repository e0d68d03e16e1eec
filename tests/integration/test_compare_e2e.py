"""Two (three) evidence versions on the embedded default's bundle, built through the real serving
session (`qualflow serve` subprocess, warm-up, server Task timing records) and the real join,
stored under software-version keys; then compare. The servers run the synthetic engine (the real
tokenizer, HTTP path and timing records; one token a running request every step of its clock D):
a request's latency is its steps, which a busy machine does not stretch as it does a model's steps
(with the tiny model and a step delay, two identical sessions beside a CPU-heavy job differed by
30 %).

* base:   version `v-base`                        (the reference)
* rerun:  version `v-base` again                  (a re-qualification: a new run id, nothing
  overwritten)
* slow:   version `v-slow`, each step D longer    (a deliberate slowdown, by the test-only
  `step_delay_s`: the recorded server settings are the base's, so the runs stay comparable)

The load generator is a small stand-in for AIPerf that writes AIPerf 0.13's export files
(per-request records with client TTFT/ITL/latency, summary, inputs.json, ready marker) and is
judged by the real `judge_run`: real AIPerf costs minutes per point on this shared 2-core machine
(its multi-process start-up), this costs seconds. Set QUALFLOW_COMPARE_REAL_AIPERF=1 to run the same
test with the real pip-installed AIPerf instead."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from qualflow.evidence import store
from qualflow.evidence.compare.comparison import CompareRefused
from qualflow.evidence.compare.config import CompareOptions
from qualflow.report.compare import run_compare

DELAY = 0.2
POINT = {
    "point_id": "tiny_c2",
    "concurrency": 2,
    "isl": 16,
    "osl": 4,
    "request_count": 30,
    "warmup_request_count": 2,
    "seed": 42,
}
REAL_AIPERF = os.environ.get("QUALFLOW_COMPARE_REAL_AIPERF") == "1"
pytestmark = (
    pytest.mark.timing
)  # measured latencies decide (the three sessions share whatever load there is)


def _prompts(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    return [" ".join(rng.choice(words) for _ in range(12)) for _ in range(n)]


async def _one(client, url, model, text, osl, rid, tag):
    body = {
        "model": model,
        "input": text,
        "stream": True,
        "max_output_tokens": osl,
        "ignore_eos": True,
        "min_tokens": osl,
        "store": False,
    }
    start = time.time_ns()
    t_tokens, out, usage, err = [], [], None, None
    async with client.stream(
        "POST",
        url + "/v1/responses",
        json=body,
        headers={"X-Request-ID": rid, "X-Qualflow-Phase": tag},
    ) as r:
        if r.status_code != 200:
            err = {"code": r.status_code, "message": (await r.aread()).decode()[:200]}
        else:
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                ev = json.loads(line[5:])
                if ev.get("type") == "response.output_text.delta":
                    t_tokens.append(time.time_ns())
                    out.append(ev.get("delta", ""))
                elif ev.get("type") in ("response.completed", "response.incomplete"):
                    usage = (ev.get("response") or {}).get("usage")
    end = time.time_ns()
    return rid, start, end, t_tokens, "".join(out), usage, err


def fake_aiperf_point(point, client, *, point_dir, phase_header=None, **_):
    """Stand-in for qualflow.aiperf.runner.run_point: same inputs, AIPerf 0.13's export files."""
    import httpx

    from qualflow.aiperf.record import PointRun

    url, model_name = client.url, client.model_name

    from qualflow.aiperf.exports import judge_run

    point_dir = Path(point_dir)
    adir = point_dir / "aiperf"
    shutil.rmtree(adir, ignore_errors=True)
    adir.mkdir(parents=True)
    n_w, n_p = point.warmup_request_count, point.request_count
    texts = _prompts(n_w + n_p, point.seed)
    jobs = [
        ("warmup" if i < n_w else "profiling", i, texts[i], str(uuid.uuid4()))
        for i in range(n_w + n_p)
    ]

    async def run_all():
        async with httpx.AsyncClient(timeout=120) as client:
            res = []
            for phase in ("warmup", "profiling"):
                todo = [j for j in jobs if j[0] == phase]
                sem = asyncio.Semaphore(point.concurrency)
                t0 = time.time_ns()

                async def go(j, sem=sem):
                    async with sem:
                        return j, await _one(
                            client, url, model_name, j[2], point.osl, j[3], phase_header
                        )

                res += await asyncio.gather(*(go(j) for j in todo))
                if phase == "profiling":
                    dur = (time.time_ns() - t0) / 1e9
            return res, dur

    results, duration = asyncio.run(run_all())
    recs, outputs, n_out = [], [], 0
    for (phase, i, _text, rid), (_, start, end, tt, out, usage, err) in results:
        md = {
            "x_request_id": rid,
            "conversation_id": f"session_{i:06d}",
            "turn_index": 0,
            "session_num": i,
            "request_start_ns": start,
            "request_end_ns": end,
            "benchmark_phase": phase,
            "was_cancelled": False,
        }
        if phase == "profiling":
            md["profiling_index"] = i - n_w
        osl = (usage or {}).get("output_tokens") or len(tt)
        metrics = (
            {}
            if err or not tt
            else {
                "request_latency": {"value": (tt[-1] - start) / 1e6, "unit": "ms"},
                "time_to_first_token": {"value": (tt[0] - start) / 1e6, "unit": "ms"},
                "time_to_second_token": {
                    "value": (tt[1] - tt[0]) / 1e6 if len(tt) > 1 else None,
                    "unit": "ms",
                },
                "inter_token_latency": {
                    "value": (tt[-1] - tt[0]) / 1e6 / max(len(tt) - 1, 1),
                    "unit": "ms",
                },
                "decode_duration": {"value": (tt[-1] - tt[0]) / 1e6, "unit": "ms"},
                "input_sequence_length": {"value": point.isl, "unit": "tokens"},
                "output_sequence_length": {"value": osl, "unit": "tokens"},
            }
        )
        n_out += osl if phase == "profiling" else 0
        recs.append({"metadata": md, "metrics": metrics, "error": err})
        outputs.append({"x_request_id": rid, "response_text": out})
    (adir / "profile_export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (adir / "inputs.json").write_text(
        json.dumps(
            {
                "data": [
                    {
                        "session_id": f"session_{i:06d}",
                        "payloads": [
                            {
                                "input": t,
                                "model": model_name,
                                "stream": True,
                                "max_output_tokens": point.osl,
                            }
                        ],
                    }
                    for i, t in enumerate(texts)
                ]
            },
            sort_keys=True,
        )
    )
    (adir / "outputs.json").write_text(json.dumps({"schema_version": "1.0", "data": outputs}))
    n_err = sum(1 for r in recs if r["error"] and r["metadata"]["benchmark_phase"] == "profiling")
    (adir / "profile_export_aiperf.json").write_text(
        json.dumps(
            {
                "aiperf_version": "stand-in",
                "run_info": {"random_seed": point.seed},
                "was_cancelled": False,
                "is_complete": True,
                "request_count": {"avg": float(n_p - n_err)},
                "request_throughput": {"avg": n_p / duration},
                "output_token_throughput": {"avg": n_out / duration},
                "benchmark_duration": {"avg": duration},
            }
        )
    )
    (adir / ".aiperf_results_ready.json").write_text(json.dumps({"ready": True}))
    v = judge_run(
        adir, expected_requests=n_p, expected_warmup=n_w, expected_seed=point.seed, exit_code=0
    )
    rec = PointRun(
        point=point,
        command="stand-in load generator (tests/integration/test_compare_e2e.py)",
        exit_code=0,
        verdict=v,
        dataset_sha256=v.dataset_sha256,
    )
    rec.write(point_dir / "run.json")
    return rec


def serving_session(bundle: str, out: str, delay: float) -> int:
    """One serving session (real server, synthetic engine on the D clock, each step `delay` s
    longer), in its own process (run as a script)."""
    from qualflow.runtime.config import EngineConfig
    from qualflow.session.config import SessionConfig
    from qualflow.session.run import run_session

    cfg = SessionConfig(
        bundle=bundle,
        out=out,
        points=json.dumps([POINT]),
        model_name="m",
        startup_timeout=180,
        warmup_requests=2,
        warmup_max_tokens=4,
        protocol=False,
        engine=EngineConfig(engine_kind="synthetic", step_ms=DELAY * 1000, step_delay_s=delay),
    )
    Path(out + ".started").write_text("")  # the parent starts the next session only after this
    return run_session(cfg, point_runner=None if REAL_AIPERF else fake_aiperf_point)


# (name, version key, added step delay). The three sessions run at the same time (each started
# 1.1 s after the previous one has imported everything and is about to begin, so their run ids,
# which have one-second resolution, differ even when imports are slow on a loaded machine), so a
# load change on this shared host hits all of them alike: the two identical configurations differ
# only by noise, the slow one by its added delay.
SESSIONS = (("base", "v-base", 0.0), ("rerun", "v-base", 0.0), ("slow", "v-slow", DELAY))


@pytest.fixture(scope="module")
def three_runs(bundle_dir, pinned, tmp_path_factory):
    from qualflow.aiperf.command import AiperfPoint
    from qualflow.evidence.inputs import EvidenceInputs
    from qualflow.evidence.join import build_evidence

    tmp = tmp_path_factory.mktemp("compare")
    root = tmp / "evidence"
    t0 = time.monotonic()
    procs = {}
    try:
        for name, _, delay in SESSIONS:
            log = open(tmp / f"{name}.log", "w")
            # one torch thread per server (the tokenizer's and the warm-up's work only)
            env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
            procs[name] = subprocess.Popen(
                [sys.executable, __file__, str(bundle_dir), str(tmp / name), str(delay)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
            started = Path(str(tmp / name) + ".started")
            while not started.exists() and procs[name].poll() is None:
                time.sleep(0.1)
            time.sleep(1.1)
        for name, p in procs.items():
            assert p.wait(timeout=400) == 0, (tmp / f"{name}.log").read_text()[-3000:]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait()
    runs = {}
    for name, version, _ in SESSIONS:
        inputs = EvidenceInputs(
            session=str(tmp / name),
            correctness=None,
            bundle=str(bundle_dir),
            pin=str(pinned),
            model="embedded",
            profile="fp16",
            software_key=version,
            out=str(root / version / "embedded" / "fp16"),
        )
        runs[name] = build_evidence(inputs, [AiperfPoint.from_dict(POINT)])
    print(f"three serving sessions + joins: {time.monotonic() - t0:.1f}s")
    return tmp, root, runs


def test_requalification_is_a_new_run_not_an_overwrite(three_runs, capsys):
    tmp, root, runs = three_runs
    assert runs["base"]["run_id"] != runs["rerun"]["run_id"]
    refs = store.list_runs(root)
    assert {(r.version, r.run_id) for r in refs} == {
        ("v-base", runs["base"]["run_id"]),
        ("v-base", runs["rerun"]["run_id"]),
        ("v-slow", runs["slow"]["run_id"]),
    }
    assert [r.run_id for r in store.resolve("v-base", root)] == [runs["rerun"]["run_id"]]  # latest
    assert [r.run_id for r in store.resolve(runs["base"]["run_id"], root)] == [
        runs["base"]["run_id"]
    ]
    from qualflow.cli import main

    assert main(["evidence", "list", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert (
        "v-base" in out and "v-slow" in out and runs["base"]["run_id"] in out and "tiny_c2" in out
    )
    assert "implemented" in out  # no correctness run here: the ladder stops at implemented


def test_slowdown_is_significant(three_runs):
    tmp, root, runs = three_runs
    # v-slow has one run: its run-to-run noise is not measured, so with no floor at all (the default
    # floor off) the slowdown is shown but not judged
    res = run_compare(
        "v-base",
        "v-slow",
        root=root,
        out=tmp / "cmp-slow-unmeasured",
        opts=CompareOptions(default_floor_rel=0),
    )
    assert res["significant"] == [] and any("ITL p50" in s for s in res["inconclusive"]), res
    # (the default floor's verdicts: tests/evidence/compare/test_default_floor.py)
    res = run_compare(
        "v-base",
        "v-slow",
        root=root,
        out=tmp / "cmp-slow",
        opts=CompareOptions(noise_rel=0.10, noise_abs_ms=2.0),
    )
    m = __import__("pandas").read_parquet(tmp / "cmp-slow" / "compare.parquet")
    itl = m[(m["metric"] == "client_itl_ms") & (m["stat"] == "p50")].iloc[0]
    assert itl["significant"] and itl["verdict"] == "regression", itl.to_dict()
    assert itl["rel_delta"] > 0.3  # twice the step clock
    lat = m[(m["metric"] == "client_request_latency_ms") & (m["stat"] == "p50")].iloc[0]
    assert lat["significant"] and lat["verdict"] == "regression"
    assert any("ITL p50" in s for s in res["significant"])
    html = (tmp / "cmp-slow" / "compare.html").read_text()
    assert "significant change" in html and "FORCED" not in html


def test_identical_configurations_show_nothing_significant(three_runs):
    tmp, root, runs = three_runs
    res = run_compare(
        f"v-base@{runs['base']['run_id']}",
        f"v-base@{runs['rerun']['run_id']}",
        root=root,
        out=tmp / "cmp-same",
    )
    assert res["significant"] == [], res["significant"]
    assert "No significant change" in (tmp / "cmp-same" / "compare.html").read_text()


def test_different_workload_is_refused_unless_forced(three_runs):
    import pandas as pd

    from qualflow.evidence.store import write_table

    tmp, root, runs = three_runs
    d = tmp / "other" / "v-other" / "embedded" / "fp16"
    shutil.copytree(
        root / "v-slow" / "embedded" / "fp16", d, ignore=shutil.ignore_patterns("history")
    )
    r = pd.read_parquet(d / "runs.parquet")
    r["workload"] = r["workload"].map(
        lambda w: json.dumps({**json.loads(w), "osl": 99}, sort_keys=True)
    )
    write_table(r, d / "runs.parquet")
    with pytest.raises(CompareRefused, match="workload differs in osl"):
        run_compare("v-base", str(d), root=root, out=tmp / "cmp-refused")
    assert not (tmp / "cmp-refused" / "compare.html").exists()
    res = run_compare(
        "v-base", str(d), root=root, out=tmp / "cmp-forced", opts=CompareOptions(force=True)
    )
    assert res["forced"]
    html = (tmp / "cmp-forced" / "compare.html").read_text()
    assert html.index("FORCED COMPARISON") < html.index("<h1>")
    # and through the CLI: a clear message and a non-zero exit
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "qualflow.cli",
            "compare",
            "--base",
            "v-base",
            "--head",
            str(d),
            "--root",
            str(root),
            "--out",
            str(tmp / "cmp-cli"),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "refusing to compare" in p.stderr and "--force" in p.stderr


if __name__ == "__main__":
    sys.exit(serving_session(sys.argv[1], sys.argv[2], float(sys.argv[3])))
