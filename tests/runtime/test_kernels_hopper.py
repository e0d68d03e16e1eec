"""Every Triton kernel of the runtime compiles for Hopper (sm90) as the engine launches it there:
with programmatic dependent launch (kernels.pdl: the grid-dependency wait and the early launch of
the next kernel in the PTX), and the paged decode kernel with its in-kernel merge (an
acquire-release atomic arrival count). Compiled ahead of time, no GPU needed; skipped where
Triton is not installed (as in CI: the kernels' numerics are checked in Triton's interpreter by
test_engine_kernel, test_fused_kernels and test_skinny_gemm, which cannot run the PDL
instructions)."""

from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from qualflow.runtime.kernels import (  # noqa: E402
    elementwise,
    paged_decode_kernels,
    qk_norm_rope,
    skinny_gemm,
)

HOPPER = GPUTarget("cuda", 90, 32)


def _ptx(
    fn, signature: dict[str, str], constexprs: dict, aligned: tuple[str, ...] = (), **options
) -> str:
    """`aligned`: arguments known divisible by 16, as Triton's launcher specializes them at run time
    (pointers from torch's allocator, strides of model-sized rows)."""
    sig = {name: ("constexpr" if name in constexprs else kind) for name, kind in signature.items()}
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(signature) if name in aligned}
    compiled = triton.compile(
        ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
        target=HOPPER,
        options={"launch_pdl": True, **options},
    )
    return compiled.asm["ptx"]


def _args(names: str, kind: str) -> dict[str, str]:
    return {n: kind for n in names.split()}


def _pdl(ptx: str) -> bool:
    return "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx


@pytest.mark.parametrize("glu", [False, True])
def test_skinny_gemm_compiles_with_programmatic_launch(glu):
    sig = {
        **_args("X W Y", "*fp16"),
        **_args("M N s_xm s_wn s_ym", "i32"),
        **_args("K BM BN BK EVEN GLU PDL", "constexpr"),
    }
    ptx = _ptx(
        skinny_gemm._skinny_kernel,
        sig,
        dict(K=1024, BM=16, BN=16, BK=128, EVEN=True, GLU=glu, PDL=True),
        num_warps=2,
        num_stages=4,
    )
    assert _pdl(ptx)
    # the first weight chunk is loaded before the wait: a global load precedes griddepcontrol.wait
    assert ptx.index("ld.global") < ptx.index("griddepcontrol.wait")


def test_fused_elementwise_kernels_compile_with_programmatic_launch():
    rms = {
        **_args("H R W HO Y", "*fp16"),
        "C": "i32",
        "eps": "fp32",
        **_args("s_h s_r s_ho s_y", "i32"),
        **_args("HAS_RES BLOCK PDL", "constexpr"),
    }
    assert _pdl(
        _ptx(elementwise._add_rms_norm_kernel, rms, dict(HAS_RES=True, BLOCK=1024, PDL=True))
    )
    assert _pdl(
        _ptx(
            qk_norm_rope._qk_norm_rope_kernel,
            QK,
            dict(H=16, KV=8, D=128, BLOCK_T=1, STORE=True, PDL=True),
            num_warps=1,
        )
    )
    silu = {**_args("Y O", "*fp16"), **_args("I s_y s_o", "i32"), **_args("BLOCK PDL", "constexpr")}
    assert _pdl(_ptx(elementwise._silu_mul_kernel, silu, dict(BLOCK=1024, PDL=True)))


QK = {
    **_args("QKV WQ WK", "*fp16"),
    **_args("COS SIN", "*fp32"),
    "POS": "*i64",
    **_args("QO KO VO KC VC", "*fp16"),
    "SLOT": "*i64",
    "eps": "fp32",
    "N": "i32",
    **_args("s_t s_qo s_qh s_ko s_kh s_vo s_vh s_tab s_c s_ch", "i32"),
    **_args("H KV D BLOCK_T STORE PDL", "constexpr"),
}


def test_qk_norm_rope_prefill_tile_moves_rows_in_16_byte_accesses():
    """The prefill steps' tile (16 tokens of one head a program) loads and stores whole 16-byte
    vectors: a head's halves are loaded apart, not gathered through a rotate-half index (which
    left every load and store 2 bytes wide)."""
    tile = qk_norm_rope.qk_tile_for(8192)
    assert tile.block_t > 1
    aligned = tuple(n for n, kind in QK.items() if kind.startswith("*") or n.startswith("s_"))
    ptx = _ptx(
        qk_norm_rope._qk_norm_rope_kernel,
        QK,
        dict(H=16, KV=8, D=128, BLOCK_T=tile.block_t, STORE=True, PDL=True),
        aligned,
        num_warps=tile.num_warps,
    )
    accesses = set(re.findall(r"(?:ld|st)\.global[.\w]*", ptx))
    assert {"ld.global.v4.b32", "st.global.v4.b32"} <= accesses, accesses
    assert not any(a.endswith(".b16") for a in accesses), accesses


SPLIT = {
    **_args("Q K V", "*fp16"),
    "BT": "*i32",
    "CL": "*i32",
    "O": "*fp32",
    "LSE": "*fp32",
    "OUT": "*fp16",
    "CNT": "*i32",
    "scale": "fp32",
    **_args("s_qb s_qh s_kb s_kt s_kh s_btb s_ob s_oh s_os s_lb s_lh s_xb s_xh", "i32"),
    **_args("GROUP GROUP_PAD BLOCK D SPLITS MERGE_HERE PDL", "constexpr"),
}


@pytest.mark.parametrize("splits", [1, 16])
def test_paged_decode_compiles_as_one_kernel_with_programmatic_launch(splits):
    consts = dict(
        GROUP=2, GROUP_PAD=16, BLOCK=64, D=128, SPLITS=splits, MERGE_HERE=splits > 1, PDL=True
    )
    ptx = _ptx(paged_decode_kernels._split_kernel, SPLIT, consts, num_warps=4, num_stages=3)
    assert _pdl(ptx)
    if (
        splits > 1
    ):  # the arrival count that elects the merging program: acquire-release at GPU scope
        assert "atom.global.gpu.acq_rel.add" in ptx, [ln for ln in ptx.splitlines() if "atom" in ln]
        after = ptx[
            ptx.index("atom.global.gpu.acq_rel.add") :
        ]  # the merge reads the others' partials past L1
        assert all(ld.startswith("ld.global.cg") for ld in re.findall(r"ld\.global[.\w]*", after))
