"""`qualflow bench engine --plan tools`: its variant table, the shapes and rounds of its figures,
the requests' groups (a fake Task: the grammar reaches each request of its group only, each group's
figures are its own), and the figures' rows and schema points."""

from __future__ import annotations

import asyncio
import types
import typing

import numpy as np
import pytest

from qualflow.bench import constrained, results
from qualflow.bench.config import PLANS
from qualflow.bench.constrained_load import Group, free_call, required, run_groups
from qualflow.bench.variants import plan
from qualflow.runtime import FinalEvent, SamplingParams, TaskTiming, TokenEvent


def test_every_plan_the_flag_offers_has_variants():
    for name in typing.get_args(PLANS):
        variants, _ = plan(name, "on")
        assert variants and sum(v.main for v in variants) == 1, name


def test_the_tools_plan_measures_the_pilot_point_and_the_constrained_figures_on_one_variant():
    variants, pairs = plan("tools", "on")
    [v] = variants
    assert v.constrained and v.main and v.points == ("c64_isl1024_osl256",)
    assert pairs == ()
    assert not any(v.constrained for n in ("async", "v3", "prefix") for v in plan(n, "on")[0])


def test_the_pilot_shape_scales_down_on_tiny():
    assert constrained.shape(False) == (64, 1024, 256)
    assert constrained.shape(True) == (4, 32, 16)


def test_rounds_cover_the_minimum_time_and_repeats():
    assert constrained.rounds_for(1.0, 3.0, 3) == (1, 3)
    assert constrained.rounds_for(0.1, 3.0, 3) == (10, 3)
    waves, rounds = constrained.rounds_for(2.0, 3.0, 3)
    assert waves == 1 and rounds == 3


def test_the_required_grammar_is_the_pilot_tool_set_and_free_one_unbounded_string():
    g = required()
    assert g.kind == "calls" and g.parallel
    assert [t["name"] for t in g.tools] == ["get_weather", "get_time"]
    assert all(t["strict"] for t in g.tools)
    f = free_call("q")
    assert f.tools[0]["parameters"]["properties"] == {"query": {"type": "string"}}


class FakeTask:
    """Yields `osl` tokens a request, one event each, slower for constrained requests."""

    def __init__(self):
        self.grammars: dict[str, object] = {}

    def default_params(self, **kw):
        return SamplingParams(**kw)

    async def generate(self, req):
        self.grammars[req.request_id] = req.grammar
        for t in range(req.params.max_new_tokens):
            await asyncio.sleep(0.002 if req.grammar is not None else 0.0005)
            yield TokenEvent(req.request_id, [t], "x")
        n = req.params.max_new_tokens
        yield FinalEvent(req.request_id, "length", 4, n, "x" * n, list(range(n)), TaskTiming(0))


def test_groups_run_at_once_each_with_its_own_grammar_and_figures():
    task = FakeTask()
    g = required()
    groups = [Group("plain", 2, 4), Group("other", 2, 4, g)]
    figs = asyncio.run(run_groups(task, groups, isl=8, osl=5))
    assert {k for k, v in task.grammars.items() if v is g} == {f"other-0-{i}" for i in range(4)}
    assert all(task.grammars[f"plain-0-{i}"] is None for i in range(4))
    assert figs["plain"]["requests"] == figs["other"]["requests"] == 4
    assert figs["plain"]["output_tokens"] == 20
    assert figs["plain"]["itl_ms_p50"] < figs["other"]["itl_ms_p50"]
    assert figs["plain"]["request_tok_per_s_p50"] > figs["other"]["request_tok_per_s_p50"]


def test_a_group_whose_requests_end_early_is_an_error():
    class Short(FakeTask):
        async def generate(self, req):
            yield TokenEvent(req.request_id, [1], "x")
            yield FinalEvent(req.request_id, "stop", 4, 1, "x", [1], TaskTiming(0))

    with pytest.raises(RuntimeError, match="did not run to length"):
        asyncio.run(run_groups(Short(), [Group("g", 1, 2)], isl=4, osl=3))


RECORD = {
    "tools_vs_none": {
        "concurrency": 64,
        "isl": 1024,
        "osl": 256,
        "breaks": 0,
        "required": {"ratio": 0.93, "met": True},
        "free": {"ratio": 0.6},
    },
    "mixed_batch": {"slower_pct": 1.5, "met": True, "breaks": 0},
    "schema_latency": {"error": "RuntimeError('x')"},
}


def test_the_rows_hold_each_figure_and_none_where_one_failed():
    rows = {label: (v, met) for label, v, _, met in constrained.rows(RECORD)}
    assert rows["required / none tok/s"] == (0.93, True)
    assert rows["free string / none tok/s"] == (0.6, None)
    assert rows["shared batch ITL p50 slower"] == (1.5, True)
    assert rows["new schema added TTFT p50"] == (None, None)


def test_the_figures_print_beside_the_previous_run(capsys):
    prev = {"constrained": {"tools_vs_none": {"required": {"ratio": 0.88}}}}
    constrained.print_constrained({"constrained": RECORD}, prev)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "required / none" in x)
    assert "0.930" in line and "0.880" in line and "True" in line
    assert "schema_latency: RuntimeError('x')" in out


def test_an_engine_result_carries_the_constrained_figures_as_schema_points():
    pts = {p["name"]: p["figures"] for p in results.engine_points({"constrained": RECORD})}
    assert pts["constrained_required_vs_none"] == {"ratio": 0.93}
    assert pts["constrained_shared_batch"] == {"itl_slower_pct": 1.5}
    assert "constrained_new_schema" not in pts  # failed: no point
    assert np.isfinite(pts["constrained_free_vs_none"]["ratio"])


class PromptTask(FakeTask):
    """FakeTask that keeps each request's prompt."""

    def __init__(self):
        super().__init__()
        self.prompts: dict[str, tuple[int, ...]] = {}

    async def generate(self, req):
        self.prompts[req.request_id] = tuple(req.prompt_token_ids)
        async for ev in super().generate(req):
            yield ev


@pytest.mark.parametrize("figure", ["tools_vs_none", "mixed_batch", "schema_latency"])
def test_no_measured_request_repeats_a_prompt_the_prefix_cache_has_seen(figure):
    # The engine caches prompts: a side that re-sent the prompts of the side before it would skip
    # their prefill, and the comparison would favour whichever side ran second.
    task = PromptTask()
    cfg = types.SimpleNamespace(tiny=True, min_seconds=0.01, min_repeats=2)
    getattr(constrained, figure)(task, cfg)
    prompts = list(task.prompts.values())
    assert len(set(prompts)) == len(prompts)
    assert all(len(set(p)) > 1 for p in prompts)  # random tokens, not one token repeated
