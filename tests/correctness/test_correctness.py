"""Family correctness on the embedded default: passes as built, fails when one weight is
perturbed."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from safetensors.torch import load_file, save_file

from qualflow.artifacts.bundle_format import compute_bundle_hash
from qualflow.cli import main
from qualflow.correctness.criteria import check_case, variants
from qualflow.families import get_family
from qualflow.files import sha256_file


def test_embedded_default_passes(bundle_dir, tmp_path, capsys):
    out = tmp_path / "correctness.parquet"
    assert main(["correctness", "--bundle", str(bundle_dir), "--out", str(out)]) == 0
    df = pd.read_parquet(out)
    assert set(df.criterion) == {
        "max_rel_logit_diff",
        "max_kl",
        "top1_agreement",
        "greedy_continuation",
        "rendering_equal",
    }
    tools = df.prompt_id.str.endswith("@tools")
    assert df.passed.all() and len(df) == 4 * df.prompt_id.nunique() + tools.sum() / 5 >= 15
    assert (df.thresholds_version == "qwen3-correctness-v1").all()
    assert "criteria passed" in capsys.readouterr().out
    # the reasoning variant: every prompt again, rendered with thinking on, the same criteria and
    # thresholds
    plain = [p["id"] for p in get_family("qwen3").correctness_spec()["prompts"]]
    assert set(df.prompt_id) == set(plain) | {
        f"{p}@{v}" for p in plain for v in ("reasoning", "tools")
    }
    for p in plain:
        a, b = (
            df[df.prompt_id == p].set_index("criterion"),
            df[df.prompt_id == f"{p}@reasoning"].set_index("criterion"),
        )
        assert (a["threshold"] == b["threshold"]).all() and set(a.index) == set(b.index)
    assert set(df[df.prompt_id.str.endswith("@reasoning")].case_id) == {
        f"{p}@reasoning/{c}"
        for p in plain
        for c in ("max_rel_logit_diff", "max_kl", "top1_agreement", "greedy_continuation")
    }
    # the tools variant: the turn that offered tools, called one and got its output, rendered as
    # the reference's apply_chat_template(tools=…) renders it, token for token; the same criteria
    rendered = df[df.criterion == "rendering_equal"]
    assert set(rendered.prompt_id) == {f"{p}@tools" for p in plain}
    assert rendered.passed.all() and (rendered.measured == rendered.threshold).all()
    assert (rendered.measured > 100).all()  # the tools block, the call and its output


def _rebuilt_with_perturbed_weight(bundle_dir, dst):
    """A bundle whose builder got one weight wrong but whose manifest is self-consistent."""
    shutil.copytree(bundle_dir, dst)
    w = load_file(dst / "weights.safetensors")
    w["layers.1.o"][3, 5] += 0.5
    save_file(w, dst / "weights.safetensors", metadata={"format": "pt"})
    m = json.loads((dst / "manifest.json").read_text())
    m["files"]["weights.safetensors"] = {
        "sha256": sha256_file(dst / "weights.safetensors"),
        "size": (dst / "weights.safetensors").stat().st_size,
    }
    m["bundle_hash"] = compute_bundle_hash(m)
    (dst / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))
    return dst


@pytest.fixture(scope="module")
def perturbed(bundle_dir, tmp_path_factory):
    """The one real correctness run on a bundle with one perturbed weight (exit status, table):
    a full run costs tens of CPU-seconds, and --record-failures changes only what the CLI does
    with its failures, not the run."""
    tmp = tmp_path_factory.mktemp("perturbed")
    bad = _rebuilt_with_perturbed_weight(bundle_dir, tmp / "bad")
    out = tmp / "correctness.parquet"
    rc = main(["correctness", "--bundle", str(bad), "--out", str(out)])
    return bad, rc, pd.read_parquet(out)


def test_one_perturbed_weight_fails(perturbed):
    _, rc, df = perturbed
    assert rc == 1
    assert not df[df.criterion == "max_rel_logit_diff"].passed.any()


def test_record_failures_writes_the_failed_criteria_and_exits_0(perturbed, tmp_path, monkeypatch):
    """The same failed criteria (those of the perturbed bundle's run above, handed to the CLI in
    place of running it again) are written with --record-failures, and the exit status is 0."""
    import qualflow.correctness.cli as correctness_cli

    bad, _, failed = perturbed
    monkeypatch.setattr(correctness_cli, "_run", lambda args: failed.copy())
    out = tmp_path / "correctness.parquet"
    assert main(["correctness", "--bundle", str(bad), "--out", str(out), "--record-failures"]) == 0
    df = pd.read_parquet(out)
    assert not df.passed.all() and df.passed.any()
    assert not df[df.criterion == "max_rel_logit_diff"].passed.any()


def test_record_failures_records_a_run_that_cannot_complete(tmp_path):
    out = tmp_path / "correctness.parquet"
    assert main(["correctness", "--bundle", str(tmp_path / "no-bundle"), "--out", str(out)]) == 2
    assert not out.exists()
    assert (
        main(
            [
                "correctness",
                "--bundle",
                str(tmp_path / "no-bundle"),
                "--out",
                str(out),
                "--record-failures",
            ]
        )
        == 0
    )
    df = pd.read_parquet(out)
    assert len(df) == 1 and not df.passed.iloc[0] and "not a bundle" in df.detail.iloc[0]


def test_unknown_precision_has_no_thresholds():
    from qualflow.families import get_family

    spec = get_family("qwen3").correctness_spec()
    assert set(spec["thresholds"]) == {"float32", "float16", "bfloat16"}
    with pytest.raises(KeyError):
        spec["thresholds"]["int4"]


def test_the_table_records_the_command_that_wrote_it(tmp_path):
    """The correctness file carries `qualflow correctness ...` in its key-value metadata (the join's
    runs.commands), and reads back as the table it always was."""
    import pyarrow.parquet as pq

    from qualflow.correctness.table import recorded_command

    out = tmp_path / "correctness.parquet"
    argv = [
        "correctness",
        "--bundle",
        str(tmp_path / "no-bundle"),
        "--out",
        str(out),
        "--record-failures",
    ]
    assert main(argv) == 0
    assert recorded_command(out) == "qualflow " + " ".join(argv)
    df = pd.read_parquet(out)
    df.to_parquet(tmp_path / "plain.parquet", index=False)
    assert (
        pq.read_schema(out)
        .remove_metadata()
        .equals(pq.read_schema(tmp_path / "plain.parquet").remove_metadata())
    )
    assert recorded_command(tmp_path / "plain.parquet") is None and recorded_command(None) is None


class _Scored:
    """Just enough of a Task and a reference for check_case: a 4-token vocabulary whose logits put
    token (last + 1) % 4 first, on both sides; records how each prompt was rendered."""

    def __init__(self):
        self.rendered = []

    def render_prompt(self, instructions, messages, thinking=False):
        self.rendered.append(thinking)
        return [0, 1, 2] + ([3] if thinking else [])

    def logits(self, ids):
        import torch

        return torch.nn.functional.one_hot((torch.tensor(ids) + 1) % 4, 4).float() * 5

    score = logits

    def greedy(self, ids, n):
        out = []
        for _ in range(n):
            out.append(((ids + out)[-1] + 1) % 4)
        return out

    def default_params(self, **kw):
        from types import SimpleNamespace

        return SimpleNamespace(**kw)

    def generate_sync(self, req):
        from types import SimpleNamespace

        return SimpleNamespace(
            token_ids=self.greedy(req.prompt_token_ids, req.params.max_new_tokens)
        )


def test_a_variant_renders_its_own_way_under_the_same_criteria():
    spec = {"greedy_tokens": 3, "variants": {"reasoning": {"thinking": True}}}
    th = {"max_rel_logit_diff": 0.0, "max_kl": 0.0, "top1_margin_tol": 1.0, "top1_agreement": 1.0}
    task = _Scored()
    rows = [
        r
        for v in variants(spec)
        for r in check_case(task, task, {"id": "p", "input": "hi"}, spec, th, v)
    ]
    assert task.rendered == [False, True]
    assert [r["prompt_id"] for r in rows] == ["p"] * 4 + ["p@reasoning"] * 4
    assert all(r["passed"] for r in rows)
    with pytest.raises(ValueError, match=r"variant 'x': unknown settings \['temperature'\]"):
        variants({"variants": {"x": {"temperature": 1}}})


def test_the_logit_gaps_by_blocks_of_positions_equal_the_whole_tensors():
    """The max logit gap, its relative form and the worst KL, computed a few positions at a time,
    are the whole-tensor figures (a block that is not full at the end included)."""
    import torch

    from qualflow.correctness.criteria import _logit_gaps

    g = torch.Generator().manual_seed(3)
    ref = torch.randn(37, 1000, generator=g) * 4
    nat = ref + 1e-3 * torch.randn(37, 1000, generator=g)
    nat[36, 5] += 0.5  # the worst gap and KL in the last, partial block
    diff = (nat - ref).abs().max().item()
    lp_ref, lp_nat = ref.log_softmax(-1), nat.log_softmax(-1)
    kl = (lp_ref.exp() * (lp_ref - lp_nat)).sum(-1).max().item()
    assert _logit_gaps(ref, nat, rows=16) == (diff, diff / ref.abs().max().item(), kl)
