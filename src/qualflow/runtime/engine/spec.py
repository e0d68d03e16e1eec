"""EngineSpec: what the engine and its model runner read of their settings, resolved once by the
loader from the EngineConfig and the bundle, and passed whole to each part: the config itself, the
device, the context limit and the family's think-block tokens. What the config leaves to the device
("auto", 0) is decided here, not at each use."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import EngineConfig
from .thinking import ThinkTokens


@dataclass(frozen=True)
class EngineSpec:
    cfg: EngineConfig
    device: torch.device
    max_len: int  # tokens per request: the context limit
    think_tokens: ThinkTokens | None  # the family's think block (None: no thinking mode)

    @classmethod
    def resolve(
        cls, cfg: EngineConfig, max_len: int, think_tokens: ThinkTokens | None = None
    ) -> EngineSpec:
        return cls(cfg, torch.device(cfg.device), max_len, think_tokens)

    @property
    def max_batch(self) -> int:
        return self.cfg.max_batch

    @property
    def token_budget(self) -> int:
        """The token budget of one step (EngineConfig.token_budget)."""
        return self.cfg.token_budget()

    @property
    def async_scheduling(self) -> bool:
        """Whether step n+1 is launched before step n's tokens are read back."""
        return self.cfg.overlaps(self.device.type)
