#!/usr/bin/env bash
# Issue 49 on one lent GPU, in one call (~4-5 min on an H100/H200): `qualflow bench engine --plan
# hopper` (plan_gpu.sh): prefill attention through flash varlen ("_flash") against fresh steps of at
# most --extend-kernel-tokens through the extend kernel ("_extend", family correctness on cuda fp16
# at the unchanged thresholds runs on it, its greedy output is checked against _flash's) on c1 ISL
# 1024 TTFT and the pilot shape (c64, ISL 1024 / OSL 256); each variant's decode-step figures
# (kernels and GPU us per b1 step, the step over its weight-read floor) and prefill attention; every
# point beside its roofline and the last committed run of the GPU model. The result (kind engine)
# goes to OUT/results/<GPU model>/<date>-engine-hopper.json, the log to OUT/engine.log.
# [DEADLINE_S]: the bench's deadline (default 420).
#   bash benchmarks/device/engine49_gpu.sh OUT [DEADLINE_S]   # on the GPU
#   bash benchmarks/device/engine49_gpu.sh OUT --tiny     # the same commands on cpu, tiny model
exec bash "$(dirname "$0")/plan_gpu.sh" hopper "$@"
