# Evidence: client and server records joined by request id into the versioned tables.


rule join_evidence:
    """Join AIPerf's per-request records with the server's Task timing records by request id into
    the versioned evidence tables (requests, summary, correctness, protocol, runs)."""
    input:
        unpack(get_join_artifacts),
        session=f"{SESSION}/session.json",
        timing=f"{SESSION}/server_timing.jsonl",
        point_runs=f"{SESSION}/points",
        points=POINT_PLAN,
        correctness=CORRECTNESS,
    output:
        requests=f"{EVIDENCE}/requests.parquet",
        summary=f"{EVIDENCE}/summary.parquet",
        correctness=f"{EVIDENCE}/correctness.parquet",
        protocol=f"{EVIDENCE}/protocol.parquet",
        runs=f"{EVIDENCE}/runs.parquet",
        targets=f"{EVIDENCE}/targets.parquet",
    log:
        log_of("join_evidence"),
    benchmark:
        benchmark_of("join_evidence")
    params:
        sessiondir=lambda w, input: str(Path(input.session).parent),
        outdir=lambda w, output: str(Path(output.runs).parent),
        artifacts=artifact_flags,
        swkey=SWKEY,
        device=DEVICE,
        thresholds=get_thresholds_flag,
        software=SOFTWARE_EVIDENCE,
    localrule: True
    shell:
        "qualflow join --session {params.sessiondir} --correctness {input.correctness}"
        " {params.artifacts} --model {wildcards.model}"
        " --profile {wildcards.profile} --software-key {params.swkey} --points {input.points}"
        " --device {params.device} {params.thresholds} --out {params.outdir} > {log} 2>&1"
