"""A chat prompt rendered by a family, before tokenization: the text its chat template produced and the
token ids that follow that text (the think block a family opens in the prompt when thinking is on).
Rendering and tokenizing are separate steps so that a server can tokenize many prompts in one call."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RenderedPrompt:
    text: str                          # tokenized without special tokens (the template wrote them)
    suffix_ids: tuple[int, ...] = ()   # appended to the text's ids

    def ids(self, text_ids: list[int]) -> list[int]:
        """The prompt's token ids, given the ids of `text`."""
        return text_ids + list(self.suffix_ids) if self.suffix_ids else text_ids

    def encode(self, tokenizer) -> list[int]:
        """The prompt's token ids through a tokenizers.Tokenizer (or anything with its `encode`)."""
        return self.ids(tokenizer.encode(self.text, add_special_tokens=False).ids)
