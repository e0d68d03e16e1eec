rule family_correctness:
    """Native Task vs the family's reference implementation on fixed prompts, against the family's
    own versioned thresholds; fails the DAG on any failed criterion."""
    input:
        bundle=f"results/bundle/{SWKEY}/{{model}}/{{profile}}",
    output:
        f"results/correctness/{SWKEY}/{{model}}/{{profile}}.parquet",
    log:
        f"logs/family_correctness/{SWKEY}/{{model}}/{{profile}}.log",
    benchmark:
        f"results/benchmarks/family_correctness/{SWKEY}/{{model}}/{{profile}}.tsv"
    params:
        device=DEVICE,
        software=SOFTWARE_MODEL,
    threads: workflow.cores
    resources:
        gpu=gpus,
    shell:
        "qualflow correctness --bundle {input.bundle} --device {params.device} --out {output}"
        " > {log} 2>&1"
