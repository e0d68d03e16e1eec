"""The agreement test of the kernels' load-time self-checks (fused.self_check,
skinny_gemm.self_check, gemv.self_check): a kernel's output against its torch reference; and the
projection kernels' check (`check_projections`)."""

from __future__ import annotations

import torch


def agrees(got: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    """Finite, and within `tol` of the reference in relative (Frobenius) norm."""
    got, ref = got.float(), ref.float()
    return (
        bool(torch.isfinite(got).all())
        and float((got - ref).norm() / ref.norm().clamp_min(1e-12)) < tol
    )


def check_projections(
    device: torch.device,
    dtype: torch.dtype,
    cases: list,
    rows: tuple[int, ...],
    pdl: bool,
    tol: float,
) -> str | None:
    """Each (N, K, kernel, reference) of `cases` run at each row count of `rows` on a seeded [N, K]
    weight, launched as the engine will (`pdl`); None when all agree, else why not."""
    g = torch.Generator(device=device).manual_seed(0)
    try:
        for n, k, kernel, ref in cases:
            w = (torch.randn(n, k, device=device, generator=g) / k**0.5).to(dtype)
            for m in rows:
                x = torch.randn(m, k, device=device, generator=g).to(dtype)
                if not agrees(kernel(x, w, pdl=pdl), ref(x.float(), w.float()), tol):
                    return f"{kernel.__name__} disagrees with the reference at {m} x {n} x {k}"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run the kernel
        return f"{type(e).__name__}: {e}"
    return None
