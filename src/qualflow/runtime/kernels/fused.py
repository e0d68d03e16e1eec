"""The fused elementwise kernels of one decoder layer (fewer kernels per decode step), as Triton
kernels on CUDA with a plain-torch reference (kernels.reference) that is also the CPU path:
  - `add_rms_norm`: residual add and the next RMSNorm in one pass (or the RMSNorm alone);
  - `qk_norm_rope`: per-head RMSNorm of q and k, RoPE (positions read from the cos/sin tables
    directly) and, when given a destination, the store of k and v into the paged KV cache;
  - `silu_mul`: SwiGLU's silu(gate) * up over the fused gate_up projection's output.

Each Triton kernel rounds where the torch reference rounds (the residual sum, the normalised
value before the weight, the weight product, silu before the product), so the two differ only by
the order of the fp32 sum of squares and the rounding of exp/rsqrt. `FusedOps` is what the
family's model graph calls; it picks the kernel per call (a CUDA tensor and a kernel that passed
`self_check`) or the reference, and at skinny rows the skinny GEMM's forms (kernels.skinny_gemm).
Nothing reads back to the host, so every op can be captured in a CUDA graph."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import skinny_gemm
from .checks import agrees
from .destination import KvDestination
from .pdl import gdc_launch_dependents, gdc_wait, options
from .reference import ref_add_rms_norm, ref_qk_norm_rope, ref_silu_mul

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs
    triton = None


def available() -> bool:
    return triton is not None


# ---- Triton -------------------------------------------------------------------------------------
if triton is not None:

    @triton.jit
    def _add_rms_norm_kernel(
        H,
        R,
        W,
        HO,
        Y,
        C,
        eps,
        s_h,
        s_r,
        s_ho,
        s_y,
        HAS_RES: tl.constexpr,
        BLOCK: tl.constexpr,
        PDL: tl.constexpr,
    ):
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        row = tl.program_id(0).to(tl.int64)
        c = tl.arange(0, BLOCK)
        m = c < C
        h = tl.load(H + row * s_h + c, mask=m, other=0.0).to(tl.float32)
        if HAS_RES:
            r = tl.load(R + row * s_r + c, mask=m, other=0.0).to(tl.float32)
            hq = (h + r).to(HO.dtype.element_ty)  # the residual stream is stored rounded
            tl.store(HO + row * s_ho + c, hq, mask=m)
            h = hq.to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / C + eps)
        n = (h * inv).to(Y.dtype.element_ty).to(tl.float32)
        w = tl.load(W + c, mask=m, other=0.0).to(tl.float32)
        tl.store(Y + row * s_y + c, (w * n).to(Y.dtype.element_ty), mask=m)

    @triton.jit
    def _qk_norm_rope_kernel(
        QKV,
        WQ,
        WK,
        COS,
        SIN,
        POS,
        QO,
        KO,
        VO,
        KC,
        VC,
        SLOT,
        eps,
        N,
        s_t,
        s_qo,
        s_qh,
        s_ko,
        s_kh,
        s_vo,
        s_vh,
        s_tab,
        s_c,
        s_ch,
        H: tl.constexpr,
        KV: tl.constexpr,
        D: tl.constexpr,
        BLOCK_T: tl.constexpr,
        STORE: tl.constexpr,
        PDL: tl.constexpr,
    ):
        # one program per BLOCK_T tokens and one head: heads [0, H) are q's, [H, H + KV) k's (with
        # v's copy). A head's two halves are loaded apart, so rotate-half is arithmetic on them, not
        # a gather.
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        t = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
        j = tl.program_id(1)
        h = tl.arange(0, D // 2)[None, :]
        live = t < N
        m = live[:, None]
        is_q, is_k = j < H, j >= H
        tc = t[:, None]
        row = QKV + tc * s_t + j * D + h  # q head j, or k head j - H: both at j * D
        x1 = tl.load(row, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(row + D // 2, mask=m, other=0.0).to(tl.float32)
        w1 = tl.where(is_q, tl.load(WQ + h).to(tl.float32), tl.load(WK + h).to(tl.float32))
        w2 = tl.where(
            is_q, tl.load(WQ + D // 2 + h).to(tl.float32), tl.load(WK + D // 2 + h).to(tl.float32)
        )
        inv = (1.0 / tl.sqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D + eps))[
            :, None
        ]
        dt = QO.dtype.element_ty
        n1 = (w1 * (x1 * inv).to(dt).to(tl.float32)).to(dt).to(tl.float32)
        n2 = (w2 * (x2 * inv).to(dt).to(tl.float32)).to(dt).to(tl.float32)
        tab = tl.load(POS + t, mask=live, other=0).to(tl.int64)[:, None] * s_tab + h
        o1 = (n1 * tl.load(COS + tab, mask=m) - n2 * tl.load(SIN + tab, mask=m)).to(dt)
        o2 = (
            n2 * tl.load(COS + tab + D // 2, mask=m) + n1 * tl.load(SIN + tab + D // 2, mask=m)
        ).to(dt)
        qh = tl.minimum(j, H - 1)  # in-range pointers for the masked stores
        kvh = tl.maximum(j - H, 0)
        qo = QO + tc * s_qo + qh * s_qh + h
        tl.store(qo, o1, mask=m & is_q)
        tl.store(qo + D // 2, o2, mask=m & is_q)
        mk = m & is_k
        ko = KO + tc * s_ko + kvh * s_kh + h
        tl.store(ko, o1, mask=mk)
        tl.store(ko + D // 2, o2, mask=mk)
        vi = QKV + tc * s_t + (H + KV) * D + kvh * D + h
        v1 = tl.load(vi, mask=mk)
        v2 = tl.load(vi + D // 2, mask=mk)
        vo = VO + tc * s_vo + kvh * s_vh + h
        tl.store(vo, v1, mask=mk)
        tl.store(vo + D // 2, v2, mask=mk)
        if STORE:
            slot = tl.load(SLOT + t, mask=live, other=0).to(tl.int64)[:, None]
            kc = KC + slot * s_c + kvh * s_ch + h
            tl.store(kc, o1, mask=mk)
            tl.store(kc + D // 2, o2, mask=mk)
            vc = VC + slot * s_c + kvh * s_ch + h
            tl.store(vc, v1, mask=mk)
            tl.store(vc + D // 2, v2, mask=mk)

    @triton.jit
    def _silu_mul_kernel(Y, O, I, s_y, s_o, BLOCK: tl.constexpr, PDL: tl.constexpr):
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        row = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = c < I
        g = tl.load(Y + row * s_y + c, mask=m, other=0.0).to(tl.float32)
        u = tl.load(Y + row * s_y + I + c, mask=m, other=0.0).to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(O.dtype.element_ty).to(tl.float32)
        tl.store(O + row * s_o + c, (s * u).to(O.dtype.element_ty), mask=m)


def tri_add_rms_norm(h, delta, w, eps: float, pdl: bool = False):
    N, C = h.shape
    y = torch.empty_like(h)
    ho = torch.empty_like(h) if delta is not None else h
    r = delta if delta is not None else h
    _add_rms_norm_kernel[(N,)](
        h,
        r,
        w,
        ho,
        y,
        C,
        eps,
        h.stride(0),
        r.stride(0),
        ho.stride(0),
        y.stride(0),
        HAS_RES=delta is not None,
        BLOCK=triton.next_power_of_2(C),
        PDL=pdl,
        **options(pdl),
    )
    return ho, y


@dataclass(frozen=True)
class QkTile:
    """How `tri_qk_norm_rope` splits a step: tokens per program (each program one head of them) and
    warps per program."""

    block_t: int = 1
    num_warps: int = 1


def qk_tile_for(tokens: int) -> QkTile:
    """The tile for a step of `tokens` rows: below 128 rows (decode steps of fewer sequences) one
    token a program on one warp; from 128 on (prefill steps, large decode steps) tiles of 16
    tokens on four warps (one program per token and head is hundreds of thousands of programs at
    a full prefill budget, far from the op's bandwidth floor)."""
    return QkTile() if tokens < 128 else QkTile(16, 4)


def tri_qk_norm_rope(
    qkv,
    w_qn,
    w_kn,
    rope: tuple[torch.Tensor, torch.Tensor],
    positions,
    heads: int,
    eps: float,
    dest: KvDestination | None = None,
    pdl: bool = False,
    tile: QkTile | None = None,
):
    """ref_qk_norm_rope's computation; `rope` is its (cos_table, sin_table), the kv heads are
    what the qkv row holds beyond the q heads, `tile`: qk_tile_for's by default."""
    cos_table, sin_table = rope
    N, D = qkv.shape[0], w_qn.shape[0]
    kv_heads = (qkv.shape[1] // D - heads) // 2
    tile = tile or qk_tile_for(N)
    q = torch.empty(N, heads, D, dtype=qkv.dtype, device=qkv.device)
    k = torch.empty(N, kv_heads, D, dtype=qkv.dtype, device=qkv.device)
    v = torch.empty_like(k)
    kc, vc, slots = (
        (dest.k_cache, dest.v_cache, dest.slots) if dest is not None else (k, v, positions)
    )
    _qk_norm_rope_kernel[(triton.cdiv(N, tile.block_t), heads + kv_heads)](
        qkv,
        w_qn,
        w_kn,
        cos_table,
        sin_table,
        positions,
        q,
        k,
        v,
        kc,
        vc,
        slots,
        eps,
        N,
        qkv.stride(0),
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        cos_table.stride(0),
        kc.stride(0),
        kc.stride(1),
        H=heads,
        KV=kv_heads,
        D=D,
        BLOCK_T=tile.block_t,
        STORE=dest is not None,
        PDL=pdl,
        num_warps=tile.num_warps,
        **options(pdl),
    )
    return q, k, v


def tri_silu_mul(y, pdl: bool = False):
    N, I = y.shape[0], y.shape[1] // 2
    o = torch.empty(N, I, dtype=y.dtype, device=y.device)
    block = min(1024, triton.next_power_of_2(I))
    _silu_mul_kernel[(N, triton.cdiv(I, block))](
        y, o, I, y.stride(0), o.stride(0), BLOCK=block, PDL=pdl, **options(pdl)
    )
    return o


class FusedOps:
    """The ops the family's fused layer path calls. A call runs its Triton kernel when the tensor
    is on CUDA and `self_check` passed on this device (`use_triton`), the torch reference
    otherwise. `linear` and `gate_up_silu` run the skinny GEMM for steps of at most `skinny_rows`
    rows (0: never), torch's GEMM otherwise. `pdl`: the kernels launch with programmatic
    dependent launch (kernels.pdl)."""

    def __init__(
        self,
        use_triton: bool = False,
        any_device: bool = False,
        skinny_rows: int = 0,
        pdl: bool = False,
    ):
        self.use_triton = use_triton and available()
        self.any_device = (
            any_device  # Triton's interpreter (TRITON_INTERPRET=1) runs CPU tensors: tests
        )
        self.skinny_rows = min(skinny_rows, skinny_gemm.MAX_ROWS) if self.use_triton else 0
        self.pdl = pdl and self.use_triton

    def _skinny(self, x: torch.Tensor) -> bool:
        return x.shape[0] <= self.skinny_rows and self._tri(x)

    def linear(self, x, w):
        if self._skinny(x):
            return skinny_gemm.skinny_gemm(x, w, pdl=self.pdl)
        return F.linear(x, w)

    def gate_up_silu(self, x, w_gu):
        """silu(gate) * up of the fused gate_up projection: one kernel at skinny rows, else the
        GEMM and `silu_mul`."""
        if self._skinny(x):
            return skinny_gemm.skinny_gate_up_silu(x, w_gu, pdl=self.pdl)
        return self.silu_mul(self.linear(x, w_gu))

    def _tri(self, x: torch.Tensor) -> bool:
        return self.use_triton and (x.is_cuda or self.any_device)

    def add_rms_norm(self, h, delta, w, eps: float):
        if self._tri(h):
            return tri_add_rms_norm(h, delta, w, eps, pdl=self.pdl)
        return ref_add_rms_norm(h, delta, w, eps)

    def qk_norm_rope(
        self,
        qkv,
        w_qn,
        w_kn,
        cos_table,
        sin_table,
        positions,
        heads: int,
        kv_heads: int,
        eps: float,
        dest: KvDestination | None = None,
    ):
        D = w_qn.shape[0]
        if self._tri(qkv) and D & (D - 1) == 0:
            return tri_qk_norm_rope(
                qkv, w_qn, w_kn, (cos_table, sin_table), positions, heads, eps, dest, self.pdl
            )
        return ref_qk_norm_rope(
            qkv, w_qn, w_kn, cos_table, sin_table, positions, heads, kv_heads, eps, dest
        )

    def silu_mul(self, y):
        if self._tri(y):
            return tri_silu_mul(y, pdl=self.pdl)
        return ref_silu_mul(y)


def self_check(
    device: torch.device,
    dtype: torch.dtype,
    heads: int,
    kv_heads: int,
    head_dim: int,
    hidden: int,
    intermediate: int,
    pdl: bool = False,
    tol: float = 1e-2,
) -> str | None:
    """Run every kernel once on this device, launched as the engine will (`pdl`), against the
    reference at the model's shapes; None when
    all agree, else why not (the caller then keeps the reference: a kernel this build cannot
    compile, or one that disagrees, never serves)."""
    if not available():
        return "triton is not installed"
    if head_dim & (head_dim - 1):
        return f"head_dim {head_dim} is not a power of two"
    g = torch.Generator(device=device).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=device, generator=g).to(dtype)  # noqa: E731
    N, eps = 5, 1e-6
    try:
        h, dl, w = rnd(N, hidden), rnd(N, hidden), rnd(hidden)
        for delta in (dl, None):
            got, ref = (
                tri_add_rms_norm(h, delta, w, eps, pdl=pdl),
                ref_add_rms_norm(h, delta, w, eps),
            )
            if not (agrees(got[0], ref[0], tol) and agrees(got[1], ref[1], tol)):
                return "add_rms_norm disagrees with the reference"
        y = rnd(N, 2 * intermediate)
        if not agrees(tri_silu_mul(y, pdl=pdl), ref_silu_mul(y), tol):
            return "silu_mul disagrees with the reference"
        for tile in (
            QkTile(),
            qk_tile_for(1 << 20),
        ):  # the decode steps' launch and the prefill steps'
            if not _qk_norm_rope_agrees(rnd, g, heads, kv_heads, head_dim, eps, pdl, tile, tol):
                return f"qk_norm_rope ({tile}) disagrees with the reference"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run a kernel
        return f"{type(e).__name__}: {e}"
    return None


def _qk_norm_rope_agrees(
    rnd,
    g: torch.Generator,
    heads: int,
    kv_heads: int,
    head_dim: int,
    eps: float,
    pdl: bool,
    tile: QkTile,
    tol: float,
) -> bool:
    """tri_qk_norm_rope launched with `tile` against the reference: 37 tokens (tiles of 16 end
    part-full) at scattered positions, stored at scattered slots of a cache of 48."""
    device = g.device
    n, slots_n, dtype = 37, 48, rnd(1).dtype
    qkv = rnd(n, (heads + 2 * kv_heads) * head_dim)
    wq, wk = rnd(head_dim), rnd(head_dim)
    ang = torch.rand(64, head_dim, device=device, generator=g) * 6.28
    pos = torch.randint(0, 64, (n,), device=device, generator=g)
    slots = torch.randperm(slots_n, device=device, generator=g)[:n]
    outs = []
    for triton_kernel in (True, False):
        kc = torch.zeros(slots_n, kv_heads, head_dim, device=device, dtype=dtype)
        vc = torch.zeros_like(kc)
        dest = KvDestination(kc, vc, slots)
        if triton_kernel:
            q, k, v = tri_qk_norm_rope(
                qkv, wq, wk, (ang.cos(), ang.sin()), pos, heads, eps, dest, pdl, tile
            )
        else:
            q, k, v = ref_qk_norm_rope(
                qkv, wq, wk, ang.cos(), ang.sin(), pos, heads, kv_heads, eps, dest
            )
        outs.append((q, k, v, kc, vc))
    return all(agrees(a, b, tol) for a, b in zip(*outs))
