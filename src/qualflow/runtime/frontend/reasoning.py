"""The caller's side of a request with thinking on: its output ids split into reasoning (up to and
including the end-think token) and answer (after it), each decoded incrementally on its own. The
end-think token is in neither text, and the blank lines the family puts after it are not the
answer's (leading newlines of the answer are dropped; its token count keeps them)."""

from __future__ import annotations

from .detok import IncrementalDecoder


class ThinkSplit:
    def __init__(self, tokenizer, end_id: int):
        self.end_id = end_id
        self.reasoning, self.answer = IncrementalDecoder(tokenizer), IncrementalDecoder(tokenizer)
        self.open = True  # the think block has not closed yet
        self.reasoning_tokens = 0  # the end-think token included
        self.answer_started = False  # some answer text (beyond leading newlines) was produced
        self.reasoning_parts: list[str] = []
        self.answer_parts: list[str] = []

    def push(self, ids: list[int]) -> tuple[str, str]:
        """New (reasoning text, answer text) of these output ids."""
        reasoning, answer = "", ""
        if self.open:
            cut = ids.index(self.end_id) if self.end_id in ids else len(ids)
            self.reasoning_tokens += min(len(ids), cut + 1)
            reasoning = self.reasoning.push(ids[:cut])
            if cut < len(ids):
                self.open = False
                reasoning += self.reasoning.flush()
                ids = ids[cut + 1 :]
            else:
                ids = []
            self.reasoning_parts.append(reasoning)
        if ids:
            answer = self._answer(self.answer.push(ids))
        return reasoning, answer

    def _answer(self, text: str) -> str:
        if not self.answer_started:
            text = text.lstrip("\n")
            self.answer_started = bool(text)
        self.answer_parts.append(text)
        return text

    def flush(self) -> tuple[str, str]:
        """At the end: the held-back tails (reasoning, answer)."""
        reasoning = ""
        if self.open:
            reasoning = self.reasoning.flush()
            self.reasoning_parts.append(reasoning)
        return reasoning, self._answer(self.answer.flush())

    @property
    def reasoning_text(self) -> str:
        return "".join(self.reasoning_parts)

    @property
    def answer_text(self) -> str:
        return "".join(self.answer_parts)
