"""Programmatic dependent launch (PDL, Hopper and later) for the runtime's Triton kernels.

A kernel launched with PDL may start while the kernel before it in the stream is still running. Each
of our kernels then calls `gdc_wait` before it reads anything an earlier kernel wrote and before it
writes anything. That wait returns once the previous kernel has finished and its writes are visible,
and the previous kernel finished only after its own wait, so the order holds along the whole chain.
Right after the wait the kernel calls `gdc_launch_dependents`, which lets the next kernel launch at
once. Before its wait a kernel may only read constant inputs: the skinny GEMM loads its first weight
chunk there. A decode step at batch 1 is some 280 kernels of a few microseconds each, so what a
launch costs is a large part of the step. Inside a CUDA graph the launches become programmatic
edges.

A kernel that runs without PDL (`PDL=False`: CPU, Triton's interpreter, an older GPU or Triton, or
`--no-programmatic-launch`) compiles with neither call and launches as before."""

from __future__ import annotations

import torch

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # no Triton, or one without grid dependency control
    gdc_launch_dependents = gdc_wait = None


def supported(device: torch.device) -> str | None:
    """None when the runtime's kernels can launch with PDL on `device`, else why not."""
    if gdc_wait is None:
        return "this Triton has no grid dependency control"
    if device.type != "cuda":
        return f"{device.type} is not cuda"
    major, _ = torch.cuda.get_device_capability(device)
    if major < 9:
        return f"compute capability {major}.x is below 9.0 (Hopper)"
    return None


def options(pdl: bool) -> dict:
    """The launch keywords of a kernel launched with (True) or without PDL."""
    return {"launch_pdl": True} if pdl else {}
