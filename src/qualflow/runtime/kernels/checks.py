"""The agreement test of the kernels' load-time self-checks (fused.self_check,
skinny_gemm.self_check): a kernel's output against its torch reference."""

from __future__ import annotations

import torch


def agrees(got: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    """Finite, and within `tol` of the reference in relative (Frobenius) norm."""
    got, ref = got.float(), ref.float()
    return (
        bool(torch.isfinite(got).all())
        and float((got - ref).norm() / ref.norm().clamp_min(1e-12)) < tol
    )
