"""The qwen3 family: native graph, weight conversion, prompt rendering (thinking on or off), stop
tokens, its thinking mode, the transformers reference, correctness criteria, the request features
it does not support and its synthetic checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

import yaml

from ..reasoning import ReasoningSpec
from ..tools import ToolCallSpec
from .convert import hf_to_native
from .model import Qwen3Config, Qwen3Model
from .prompting import render_ids


@dataclass(frozen=True)
class Qwen3Family:
    name: str = "qwen3"
    # Request features this family cannot honour: feature -> why (the server answers 400 naming it).
    unsupported_features: dict = field(default_factory=dict)
    # Thinking (the Task capability `reasoning`): `enable_thinking` in the chat template, the think
    # block <think>\n ... \n</think>\n\n (151667, 151668 in the Qwen3 tokenizer), off unless a
    # request asks; a budget of reasoning tokens per effort, `high` unbounded.
    reasoning: ReasoningSpec | None = field(
        default_factory=lambda: ReasoningSpec(
            template_on={"enable_thinking": True},
            template_off={"enable_thinking": False},
            open_ids=(151667, 198),
            end_id=151668,
            close_ids=(198, 151668, 271),
            delimiters=("<think>", "</think>"),
            budgets={"minimal": 32, "low": 64, "medium": 256, "high": None},
            default_effort=None,
        )
    )
    # Function tools: a call is <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call> (151657,
    # 151658 in the Qwen3 tokenizer); tools, calls and outputs rendered by the chat template.
    tool_calls: ToolCallSpec | None = field(
        default_factory=lambda: ToolCallSpec(
            open="<tool_call>", close="</tool_call>", open_id=151657, close_id=151658
        )
    )

    def convert_weights(self, hf_state: dict, config: dict) -> dict:
        return hf_to_native(hf_state, config)

    def kv_layout(self, config: dict) -> tuple[int, int, int]:
        c = Qwen3Config.from_hf(config)
        return c.num_layers, c.num_kv_heads, c.head_dim

    def build_model(
        self, config: dict, weights: dict, max_len: int, compile_ops: bool = False, ops=None
    ) -> Qwen3Model:
        """`ops`: the runtime's fused elementwise ops (Qwen3Model's fused path), or None."""
        return Qwen3Model(
            Qwen3Config.from_hf(config), weights, max_len, compile_ops=compile_ops, ops=ops
        )

    def render_prompt(
        self,
        tokenizer,
        chat_template: str,
        instructions: str | None,
        messages: list[dict],
        thinking: bool = False,
        tools: list[dict] | None = None,
    ) -> list[int]:
        """Prompt ids; with `thinking`, rendered with thinking on and ending in the opened think
        block. `messages`: input items (families/tools.py); `tools`: Responses function tools."""
        r = self.reasoning
        if thinking and r is None:
            raise ValueError(f"the {self.name} family has no thinking mode")
        if tools and self.tool_calls is None:
            raise ValueError(f"the {self.name} family declares no tool-call format")
        settings = {} if r is None else r.template_on if thinking else r.template_off
        ids = render_ids(tokenizer, chat_template, instructions, messages, tools, **settings)
        return ids + list(r.open_ids) if thinking else ids

    def stop_token_ids(self, generation_config: dict) -> tuple[int, ...]:
        eos = generation_config.get("eos_token_id", [])
        return tuple(sorted(set(eos if isinstance(eos, list) else [eos])))

    def correctness_spec(self) -> dict:
        """Versioned prompts, criteria and thresholds (data, not code)."""
        return yaml.safe_load(resources.files(__package__).joinpath("correctness.yaml").read_text())

    def endpoint_correctness_spec(self) -> dict:
        """Endpoint correctness (an endpoint's greedy output through the API against the reference):
        versioned criterion and threshold (data); the prompts are those of `correctness_spec()`."""
        spec = yaml.safe_load(
            resources.files(__package__).joinpath("endpoint_correctness.yaml").read_text()
        )
        spec["prompts"] = self.correctness_spec()["prompts"]
        return spec

    @property
    def synthetic_presets(self) -> tuple[str, ...]:
        from .synthetic import PRESETS

        return tuple(sorted(PRESETS))

    def write_synthetic(self, out_dir: str, preset: str, seed: int | None = None):
        """A seeded, offline checkpoint of this family in Hugging Face format (the embedded default;
        another `seed`: other weights of the same shape)."""
        from .synthetic import SEED, write_embedded

        return write_embedded(out_dir, preset, SEED if seed is None else seed)

    def load_reference(self, checkpoint_dir: str):
        from .reference import load_reference

        return load_reference(checkpoint_dir)


FAMILY = Qwen3Family()
