"""The engine of one process: a thread that owns the model and runs continuous batching over a paged
KV cache (the loop, the scheduler and its block manager, the sequences, the model runner with its
CUDA graphs, sampling), the loader that builds it from a bundle, and the interface its callers use
(`interface`: what a caller may call and read; `outputs`: the items it delivers). Callers outside
this package reach it through `loader`, `interface` and `outputs` only."""
