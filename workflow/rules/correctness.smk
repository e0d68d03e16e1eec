# Family correctness: the native Task on the bundle against the family's reference.


rule family_correctness:
    """Native Task vs the family's reference implementation on fixed prompts, against the family's
    own versioned thresholds; for an endpoint model, endpoint correctness (its greedy output through
    the API against the reference on the pinned checkpoint). A failed criterion (or a run that
    cannot complete) is recorded in the output, not a failed job: the status says so and `qualify`
    fails."""
    input:
        unpack(correctness_inputs),
    output:
        CORRECTNESS,
    log:
        log_of("family_correctness"),
    benchmark:
        benchmark_of("family_correctness")
    params:
        cmd=correctness_command,
        device=DEVICE,
        software=SOFTWARE_MODEL,
        bundle=bundle_state,
    threads: job_threads("correctness")
    resources:
        gpu=gpus,
    shell:
        "qualflow {params.cmd} > {log} 2>&1"
