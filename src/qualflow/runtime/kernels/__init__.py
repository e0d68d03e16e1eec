"""Attention over the paged KV pool and the Triton kernels behind it: tensor code only. Kernels
import nothing else of the runtime, so they can be tested, profiled and replaced on their own."""
