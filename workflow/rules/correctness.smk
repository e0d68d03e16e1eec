# Family correctness: the native Task on the bundle against the family's reference.


rule family_correctness:
    """Native Task vs the family's reference implementation on fixed prompts, against the family's
    own versioned thresholds. A failed criterion (or a run that cannot complete) is recorded in the
    output, not a failed job: the status says so and `qualify` fails."""
    input:
        bundle=BUNDLE,
    output:
        CORRECTNESS,
    log:
        log_of("family_correctness"),
    benchmark:
        benchmark_of("family_correctness")
    params:
        device=DEVICE,
        software=SOFTWARE_MODEL,
    threads: job_threads("correctness")
    resources:
        gpu=gpus,
    shell:
        "qualflow correctness --bundle {input.bundle} --device {params.device} --out {output} --record-failures"
        " > {log} 2>&1"
