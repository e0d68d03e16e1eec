"""qualflow.bench.variants: every plan is a well-formed table: distinct tags, one variant of record,
engine overrides that are EngineConfig settings with values it accepts, known points, and A/B
pairs between its own variants; plan hopper sets flash against the extend kernel on the prefill
points, plan gemv the skinny GEMM against the one-row GEMV (and that with the RMSNorm inside)
on the c1 points; a run that asked for
a kernel and did not get it says so."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from qualflow.bench.config import PLANS
from qualflow.bench.points import POINTS
from qualflow.bench.variant_load import problems
from qualflow.bench.variants import Variant, plan
from qualflow.runtime import EngineConfig

FIELDS = {f.name: f for f in dataclasses.fields(EngineConfig)}
HINTS = typing.get_type_hints(EngineConfig)


@pytest.mark.parametrize("name", typing.get_args(PLANS))
@pytest.mark.parametrize("async_scheduling", ["off", "on", "ab"])
def test_every_plan_is_a_well_formed_table(name, async_scheduling):
    variants, pairs = plan(name, async_scheduling)
    tags = [v.tag for v in variants]
    assert len(set(tags)) == len(tags)
    assert sum(v.main for v in variants) == 1
    known = {p[0] for p in POINTS}
    for v in variants:
        assert set(v.points) <= known, v
        for key, value in v.engine.items():
            assert key in FIELDS, (v.tag, key)
            allowed = typing.get_args(HINTS[key])
            assert value in allowed if allowed else isinstance(value, HINTS[key]), (v.tag, key)
    for a, b, label in pairs:
        assert a in tags and b in tags and label


def test_plan_hopper_sets_flash_against_the_extend_kernel_on_the_prefill_points():
    variants, pairs = plan("hopper", "on")
    assert [v.engine["varlen_attention"] for v in variants] == ["flash", "extend"]
    assert all(v.points == ("c1_isl1024_ttft", "c64_isl1024_osl256") for v in variants)
    assert [(a, b) for a, b, _ in pairs] == [("_flash", "_extend")]


def test_plan_gemv_sets_the_skinny_gemm_against_the_gemv_and_the_normed_gemv_on_c1():
    variants, pairs = plan("gemv", "on")
    # what each variant runs once the engine config's defaults fill in what it leaves out
    cfgs = [EngineConfig(**v.engine) for v in variants]
    assert [(c.one_row_gemv, c.one_row_gemv and c.norm_gemv) for c in cfgs] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    assert all(v.engine["skinny_gemm_rows"] == 16 for v in variants)
    assert all(p.startswith("c1_") for v in variants for p in v.points)
    assert [v.tag for v in variants if v.main] == ["_gemv_norm"]  # correctness on the new kernel
    assert [(a, b) for a, b, _ in pairs] == [("_skinny", "_gemv"), ("_gemv", "_gemv_norm")]


def test_plan_rope_sets_the_separate_kernel_against_rope_inside_attention():
    variants, pairs = plan("rope", "on")
    cfgs = [EngineConfig(**v.engine) for v in variants]
    assert [c.rope_in_attention for c in cfgs] == [False, True]
    assert [v.tag for v in variants if v.main] == ["_in"]  # correctness on the new kernel
    assert all("c1_isl128_osl256" in v.points and "c64_isl128_osl128" in v.points for v in variants)
    assert [(a, b) for a, b, _ in pairs] == [("_sep", "_in")]


INFO = {"fused_kernels": "triton", "programmatic_launch": "on"}


def test_a_cuda_run_that_asked_for_rope_inside_attention_and_did_not_get_it_fails_loudly():
    variants, _ = plan("rope", "on")
    result = {
        "points": {},
        "variants": {
            "_sep": {"task_info": {**INFO, "rope_in_attention": False}},
            "_in": {"task_info": {**INFO, "rope_in_attention": False}},
        },
    }
    assert problems(result, variants, cuda=True) == [
        "_in: q/k-norm + RoPE inside attention asked for, got False"
    ]
    result["variants"]["_in"]["task_info"]["rope_in_attention"] = True
    assert problems(result, variants, cuda=True) == []


def test_a_cuda_run_that_asked_for_cudnn_for_a_lone_prompt_and_did_not_get_it_fails_loudly():
    variants, pairs = plan("solo", "on")
    assert [EngineConfig(**v.engine).solo_prefill_attention for v in variants] == [
        "varlen",
        "cudnn",
    ]
    assert [(a, b) for a, b, _ in pairs] == [("_varlen", "_cudnn")]
    solo = {"solo_prefill_attention": "varlen", "solo_prefill_graphs": "off"}
    result = {
        "points": {},
        "variants": {"_varlen": {"task_info": {**INFO, **solo}}, "_cudnn": {"task_info": {**INFO}}},
    }
    result["variants"]["_cudnn"]["task_info"] |= {
        "solo_prefill_attention": "cudnn-dense",
        "solo_prefill_graphs": "off: capture failed: RuntimeError: x",
    }
    assert problems(result, variants, cuda=True) == [
        "_cudnn: cuDNN's dense SDPA for a lone prompt asked for, got 'cudnn-dense', graphs "
        "'off: capture failed: RuntimeError: x'"
    ]
    result["variants"]["_cudnn"]["task_info"]["solo_prefill_graphs"] = "captured"
    assert problems(result, variants, cuda=True) == []


def test_a_cuda_run_that_asked_for_the_extend_kernel_and_did_not_get_it_fails_loudly():
    variants, _ = plan("hopper", "on")
    result = {
        "points": {},
        "variants": {
            "_flash": {"task_info": {**INFO, "extend_attention": "paged-extend"}},
            "_extend": {"task_info": {**INFO, "extend_attention": "gather (no Triton)"}},
        },
    }
    assert problems(result, variants, cuda=True) == [
        "_extend: the extend kernel for fresh steps asked for, got 'gather (no Triton)'"
    ]
    result["variants"]["_extend"]["task_info"]["extend_attention"] = "paged-extend+fresh"
    assert problems(result, variants, cuda=True) == []


def test_a_cuda_run_that_asked_for_cudnn_and_did_not_get_it_fails_loudly():
    cudnn = [Variant("_cudnn", dict(varlen_attention="cudnn"), main=True)]
    result = {
        "points": {},
        "variants": {"_cudnn": {"task_info": {**INFO, "varlen_attention": "flash-varlen"}}},
    }
    assert problems(result, cudnn, cuda=True) == [
        "_cudnn: cuDNN attention asked for, got 'flash-varlen'"
    ]
    result["variants"]["_cudnn"]["task_info"]["varlen_attention"] = "cudnn-fresh+flash-varlen"
    assert problems(result, cudnn, cuda=True) == []


def test_a_cuda_run_that_asked_for_the_one_row_gemv_and_did_not_get_it_fails_loudly():
    variants, _ = plan("gemv", "on")
    result = {
        "points": {},
        "variants": {
            "_skinny": {"task_info": {**INFO, "one_row_gemv": False}},
            "_gemv": {"task_info": {**INFO, "one_row_gemv": False}},
            "_gemv_norm": {"task_info": {**INFO, "one_row_gemv": True, "norm_gemv": False}},
        },
    }
    assert problems(result, variants, cuda=True) == [
        "_gemv: the one-row GEMV asked for, got False",
        "_gemv_norm: the RMSNorm in the GEMV asked for, got False",
    ]
    result["variants"]["_gemv"]["task_info"]["one_row_gemv"] = True
    result["variants"]["_gemv_norm"]["task_info"]["norm_gemv"] = True
    assert problems(result, variants, cuda=True) == []
