"""What the engine benchmark measures besides its points: the checkpoint and bundle it runs on, the
machine it ran on, the device's copy bandwidth and matmul peak (the rooflines' inputs), family
correctness, and HF transformers' `generate` on the same weights."""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
import time
from pathlib import Path

import torch

from qualflow.artifacts.bundle import build_bundle
from qualflow.artifacts.pin import pin_checkpoint, write_pin
from qualflow.families.qwen3.synthetic import write_embedded

from . import results
from .roofline import copy_bandwidth, matmul_tflops


def prepare_bundle(work: Path, shape: str) -> Path:
    """The checkpoint of that shape (written once), its pin and its fp16 bundle; the checkpoint."""
    t = time.perf_counter()
    ckpt = work / "ckpt"
    if not (ckpt / "config.json").exists():
        write_embedded(ckpt, shape)
    pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin.json")
    build_bundle(pin, "fp16", work / "bundle", force=True)
    print(f"checkpoint + bundle: {time.perf_counter() - t:.1f}s", flush=True)
    return ckpt


def machine(device: torch.device, shape: str) -> dict:
    """The run's record as it starts: date, GPU model, software, model."""
    if device.type == "cuda":
        gpu, driver = (
            torch.cuda.get_device_name(device),
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
            ).stdout.strip(),
        )
    else:
        gpu, driver = f"cpu-{platform.machine()}", None
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "gpu": gpu,
        "git_sha": results.git_sha(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": driver,
        "model": f"{shape} shape, seeded random weights, fp16",
        "points": {},
    }


def device_figures(device: torch.device, tiny: bool) -> dict:
    bw = copy_bandwidth(device, 0.05 if tiny else 2.0)
    tf = matmul_tflops(
        device, 512 if tiny else 8192, torch.float32 if device.type == "cpu" else torch.float16
    )
    print(f"copy bandwidth {bw:.3f} TB/s, matmul {tf:.1f} TFLOP/s", flush=True)
    return {"copy_bandwidth_tb_s": bw, "matmul_tflops": tf}


def correctness(task, ckpt: Path) -> dict:
    """Family correctness, recorded (an error is recorded too: the measurement goes on)."""
    try:
        from qualflow.correctness.criteria import run_correctness

        t = time.perf_counter()
        corr = run_correctness(task, str(ckpt))
        res = {
            "passed": int(corr.passed.sum()),
            "total": len(corr),
            "thresholds_version": corr.thresholds_version.iloc[0],
            "precision": corr.effective_precision.iloc[0],
            "max_rel_logit_diff": float(
                corr[corr.criterion == "max_rel_logit_diff"].measured.max()
            ),
            "max_kl": float(corr[corr.criterion == "max_kl"].measured.max()),
        }
        print(f"correctness {res} in {time.perf_counter() - t:.1f}s", flush=True)
        if not corr.passed.all():
            print(corr[~corr.passed].to_string())
        return res
    except Exception as e:  # noqa: BLE001 - record and go on measuring
        print(f"correctness failed to run: {e!r}", flush=True)
        return {"error": repr(e)}


def hf_point(ckpt: Path, concurrency: int, isl: int, osl: int) -> dict:
    """HF transformers' `generate` on the same weights, one batch of `concurrency` (cuda)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float16).cuda().eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 100_000, (concurrency, isl), generator=gen).cuda()
    kw = dict(max_new_tokens=osl, min_new_tokens=osl, do_sample=False, pad_token_id=0)
    model.generate(ids[:, :16], **{**kw, "max_new_tokens": 4, "min_new_tokens": 4})
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(ids, **kw)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    n = (out.shape[1] - isl) * concurrency
    del model
    torch.cuda.empty_cache()
    return {"output_tok_per_s": n / wall, "wall_s": wall}


def hf_points(ckpt: Path, result: dict, points, save) -> None:
    """HF beside the first two of `points` that measured, and our speed-up over it."""
    for name, c, isl, osl, _ in points[:2]:
        if name not in result["points"] or "error" in result["points"][name]:
            continue
        h = hf_point(ckpt, c, isl, osl if c > 1 else 64)
        p = result["points"][name]
        p["hf_output_tok_per_s"] = h["output_tok_per_s"]
        p["speedup_vs_hf"] = p["output_tok_per_s"] / h["output_tok_per_s"]
        print(f"HF {name}: {h['output_tok_per_s']:.0f} tok/s", flush=True)
    save()
