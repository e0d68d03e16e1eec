"""Where a layer's new K/V go in the paged KV cache, for a kernel that stores them itself."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KvDestination:
    """The flat [slots, KV, D] views of a layer's cache and the step's token slots."""

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    slots: torch.Tensor  # [N] int64
