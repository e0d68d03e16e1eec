rule join_evidence:
    """Join AIPerf's per-request records with the server's Task timing records by request id into
    the versioned evidence tables (requests, summary, correctness, protocol, runs)."""
    input:
        session=f"results/session/{SWKEY}/{{model}}/{{profile}}/session.json",
        timing=f"results/session/{SWKEY}/{{model}}/{{profile}}/server_timing.jsonl",
        points=f"results/session/{SWKEY}/{{model}}/{{profile}}/points",
        correctness=f"results/correctness/{SWKEY}/{{model}}/{{profile}}.parquet",
        bundle=f"results/bundle/{SWKEY}/{{model}}/{{profile}}",
        pin="results/pin/{model}.json",
    output:
        requests=f"results/evidence/{SWKEY}/{{model}}/{{profile}}/requests.parquet",
        summary=f"results/evidence/{SWKEY}/{{model}}/{{profile}}/summary.parquet",
        correctness=f"results/evidence/{SWKEY}/{{model}}/{{profile}}/correctness.parquet",
        protocol=f"results/evidence/{SWKEY}/{{model}}/{{profile}}/protocol.parquet",
        runs=f"results/evidence/{SWKEY}/{{model}}/{{profile}}/runs.parquet",
    log:
        f"logs/join_evidence/{SWKEY}/{{model}}/{{profile}}.log",
    benchmark:
        f"results/benchmarks/join_evidence/{SWKEY}/{{model}}/{{profile}}.tsv"
    params:
        sessiondir=lambda w, input: str(Path(input.session).parent),
        outdir=lambda w, output: str(Path(output.runs).parent),
        points=points_arg,
        swkey=SWKEY,
        device=DEVICE,
        thresholds=thresholds_arg,
        commands=stage_commands,
        software=SOFTWARE_EVIDENCE,
    shell:
        "qualflow join --session {params.sessiondir} --correctness {input.correctness}"
        " --bundle {input.bundle} --pin {input.pin} --model {wildcards.model}"
        " --profile {wildcards.profile} --software-key {params.swkey} --points {params.points}"
        " --device {params.device} {params.thresholds} --commands {params.commands}"
        " --out {params.outdir} > {log} 2>&1"
