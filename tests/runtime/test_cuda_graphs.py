"""engine.cuda_graphs on a CUDA device (the lent GPU; skipped elsewhere): a capture that fails
leaves the device's default generator usable, so the engine that falls back to eager steps can
still sample (cuDNN's prefill graphs failed to capture on an H100, and every sampled step after
failed with "Offset increment outside graph capture")."""

from __future__ import annotations

import pytest
import torch

from qualflow.runtime.engine.cuda_graphs import capture_step

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (the lent GPU)"
)


def test_a_failed_capture_leaves_the_default_generator_usable():
    device = torch.device("cuda")
    x = torch.ones(8, device=device)

    def step():
        y = x * 2
        torch.cuda.synchronize()  # not allowed while capturing: the capture is invalidated
        return y

    with pytest.raises(RuntimeError):
        capture_step(step, device, None)
    noise = torch.empty(1024, device=device).exponential_()  # the default generator
    assert bool((noise > 0).all())
    g, out = capture_step(lambda: x * 3, device, None)  # and the next capture works
    g.replay()
    assert out.eq(3).all()
