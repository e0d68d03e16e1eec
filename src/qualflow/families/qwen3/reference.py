"""The family's reference implementation: transformers' Qwen3ForCausalLM in float32 on the CPU."""

from __future__ import annotations

import inspect
from functools import cached_property

import torch


class Reference:
    def __init__(self, checkpoint_dir: str):
        from transformers import Qwen3ForCausalLM

        self.checkpoint_dir = checkpoint_dir
        self.model = Qwen3ForCausalLM.from_pretrained(checkpoint_dir, dtype=torch.float32).eval()

    @cached_property
    def tokenizer(self):
        """transformers' tokenizer of the checkpoint, loaded once, on first use (loading builds
        the fast tokenizer: not something to repeat for every rendered prompt)."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.checkpoint_dir)

    def render(
        self, messages: list[dict], tools: list[dict] | None, chat_template: str, **settings
    ) -> list[int]:
        """Prompt ids of chat `messages` (Hugging Face conventions) with `tools`, by transformers'
        tokenizer and `apply_chat_template` with `chat_template` (the bundle's)."""
        tok = self.tokenizer
        text = tok.apply_chat_template(
            messages,
            tools=tools,
            chat_template=chat_template,
            tokenize=False,
            add_generation_prompt=True,
            **settings,
        )
        return tok(text, add_special_tokens=False).input_ids

    @torch.inference_mode()
    def logits(self, token_ids: list[int]) -> torch.Tensor:
        """Teacher-forced logits [T, V] in float32."""
        return self.model(torch.tensor([token_ids])).logits[0].float()

    @torch.inference_mode()
    def greedy(self, prompt_ids: list[int], n: int) -> list[int]:
        """Plain argmax for n tokens; stop tokens are neither suppressed nor obeyed. transformers'
        own KV cache carries the sequence from step to step (each step runs one new token, as its
        `generate` does), and the head runs on the last position only (`logits_to_keep=1`): on
        the embedded default's 151,936-row head over a 128-wide model it is most of a step's
        cost."""
        toks: list[int] = []
        ids, past = torch.tensor([prompt_ids]), None
        for _ in range(n):
            out = self.model(ids, use_cache=True, logits_to_keep=1, **{self._cache_arg: past})
            toks.append(int(out.logits[0, -1].argmax()))
            ids, past = torch.tensor([[toks[-1]]]), out.past_key_values
        return toks

    @cached_property
    def _cache_arg(self) -> str:
        """The forward's name for the KV cache: `cache` in newer transformers, `past_key_values`
        before (deprecated there)."""
        params = inspect.signature(self.model.forward).parameters
        return "cache" if "cache" in params else "past_key_values"


def load_reference(checkpoint_dir: str) -> Reference:
    return Reference(checkpoint_dir)
