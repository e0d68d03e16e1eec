"""Attention over the paged KV pool, the fused elementwise ops of a decoder layer, and the Triton
kernels behind both: tensor code only. Kernels import nothing else of the runtime, so they can be
tested, profiled and replaced on their own."""
