# Family correctness: the native Task on the bundle against the family's reference.


rule family_correctness:
    """Native Task vs the family's reference implementation on fixed prompts, against the family's
    own versioned thresholds; for an endpoint model, endpoint correctness (its greedy output through
    the API against the reference on the pinned checkpoint). A failed criterion (or a run that
    cannot complete) is recorded in the output, not a failed job: the status says so and `qualify`
    fails."""
    input:
        unpack(get_served),
        settings=MODEL_SETTINGS,
    output:
        CORRECTNESS,
    log:
        log_of("family_correctness"),
    benchmark:
        benchmark_of("family_correctness")
    params:
        artifacts=artifact_flags,
        device=DEVICE,
        startup_timeout=config["server"]["startup_timeout_s"],
        software=SOFTWARE_MODEL,
        bundle=get_bundle_state,
    threads: job_threads("correctness")
    resources:
        gpu=get_gpus,
    shell:
        "qualflow correctness --model-settings {input.settings} {params.artifacts}"
        " --device {params.device} --startup-timeout {params.startup_timeout} --out {output}"
        " --record-failures > {log} 2>&1"
