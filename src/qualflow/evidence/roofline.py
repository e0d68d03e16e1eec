"""A point's roofline beside its figures: the output tok/s limit of its concurrency, ISL and OSL
(qualflow.roofline) from the served bundle's shape (its weights' parameters and bytes, the K/V
bytes of one token) and the datasheet peaks of the GPU the session ran on, and the point's share of
it. Where there is none (a CPU session, a GPU not in the peak table, an endpoint without a bundle,
an open-loop point) the `roofline_reasons` column says why. A point whose prompts share a cached
prefix needs less prefill than the roofline counts, so its share may pass 1."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualflow.families import get_family
from qualflow.roofline import gpu_peaks, point_roofline

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


def safetensors_sizes(path: Path) -> tuple[int, int]:
    """(parameters, bytes) of the tensors of a safetensors file, from its header alone."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    params = nbytes = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for d in t["shape"]:
            count *= d
        params += count
        nbytes += t["data_offsets"][1] - t["data_offsets"][0]
    return params, nbytes


def bundle_shape(bundle: str | Path | None, manifest: dict) -> tuple[dict | None, str | None]:
    """The served model's shape from its bundle (config.json, weights.safetensors, the family's K/V
    layout at the bundle's precision), or None and why not."""
    if not bundle or not manifest:
        return None, "no bundle (an external endpoint): the model's shape is unknown"
    d = Path(bundle)
    try:
        config = json.loads((d / "config.json").read_text())
        layers, kv_heads, head_dim = get_family(manifest["family"]).kv_layout(config)
        params, nbytes = safetensors_sizes(d / "weights.safetensors")
        kv_bytes = 2 * layers * kv_heads * head_dim * DTYPE_BYTES[manifest["precision"]]
    except (OSError, KeyError, ValueError, struct.error) as e:
        return None, f"the bundle's shape could not be read: {type(e).__name__}: {e}"
    return {"params": params, "weight_bytes": nbytes, "kv_bytes_per_token": kv_bytes}, None


def session_gpu(device: str | None, gpu, hardware: dict) -> tuple[dict | None, str]:
    """The datasheet peaks of the session's GPU and its name, or None and why not."""
    if not device or not str(device).startswith("cuda"):
        return None, f"ran on {device or 'no device of ours'}: no GPU roofline"
    name = (gpu or {}).get("name") if isinstance(gpu, dict) else None
    name = name or next(iter(hardware.get("gpus") or []), None)
    peaks = gpu_peaks(name)
    if peaks is None:
        return None, f"GPU {name or 'unknown'} is not in qualflow.roofline's peak table"
    return peaks, name


@dataclass(frozen=True)
class Roofline:
    """What a session's points' rooflines rest on: the model's shape and the GPU's peaks (None
    where missing, with why)."""

    shape: dict | None
    peaks: dict | None
    gpu: str | None
    reason: str | None

    @classmethod
    def read(cls, bundle, manifest: dict, device, gpu, hardware: dict) -> Roofline:
        shape, why_shape = bundle_shape(bundle, manifest)
        peaks, gpu_or_why = session_gpu(device, gpu, hardware)
        if peaks is None:
            return cls(shape, None, None, gpu_or_why)
        return cls(shape, peaks, gpu_or_why, why_shape)

    def point_columns(self, point, requests, output_tps) -> dict:
        """The summary columns of an AIPerf point (its ISL, where its prompts come from a file:
        the mean prompt tokens of its `requests` as the server counted them)."""
        isl = point.isl
        if isl is None and requests is not None and "server_input_tokens" in requests:
            m = pd.to_numeric(requests["server_input_tokens"], errors="coerce").mean()
            isl = None if pd.isna(m) else round(float(m))
        return self.columns(point.concurrency, point.request_rate, isl, point.osl, output_tps)

    def columns(self, concurrency, request_rate, isl, osl, output_tps) -> dict:
        """The summary columns of a point of `concurrency` (closed loop), mean `isl` and `osl`."""
        why = self.reason
        if why is None and (request_rate is not None or not concurrency):
            why = "an open-loop point (request rate): no closed-loop roofline"
        if why is None and not (isl and osl):
            why = "the point's ISL or OSL is unknown"
        if why is not None:
            return {"roofline_reasons": why}
        limit = point_roofline(self.shape, int(concurrency), int(isl), int(osl), self.peaks)
        tps = limit["limit_tok_per_s"]
        return {
            "roofline_gpu": self.gpu,
            "roofline_output_token_throughput_tps": tps,
            "share_of_roofline": output_tps / tps if output_tps is not None else None,
        }
