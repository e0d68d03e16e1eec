"""Host values onto the device in one copy that does not wait for the step in flight.

On cuda the values are staged in pinned memory (torch's caching host allocator reuses the buffers),
so the copy is queued on the stream and the host goes on; a copy from pageable memory may stage
synchronously. Each call is one copy: callers pack a step's small inputs into one array and slice it
on the device, rather than copying row by row.
"""

from __future__ import annotations

import numpy as np
import torch


def to_device(values, device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """`values` (a list or an ndarray) as a tensor on `device`; lists take `dtype`, arrays keep
    theirs."""
    t = (
        torch.from_numpy(values)
        if isinstance(values, np.ndarray)
        else torch.tensor(values, dtype=dtype)
    )
    if device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)
