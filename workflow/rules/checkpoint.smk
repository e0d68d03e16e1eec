rule embedded_checkpoint:
    """The embedded default checkpoint (seeded random Qwen3 weights + real Qwen tokenizer), offline."""
    output:
        directory("results/checkpoints/{model}"),
    log:
        "logs/embedded_checkpoint/{model}.log",
    benchmark:
        "results/benchmarks/embedded_checkpoint/{model}.tsv"
    params:
        preset=lambda w: model_cfg(w)["embedded_preset"],
        software=SOFTWARE_MODEL,
    shell:
        "qualflow embedded --out {output} --preset {params.preset} > {log} 2>&1"


rule pin_checkpoint:
    """Resolve the checkpoint to an immutable identity (hub repo at a full commit sha, or a local dir
    with the sha256 of every file)."""
    input:
        checkpoint_input,
    output:
        "results/pin/{model}.json",
    log:
        "logs/pin_checkpoint/{model}.log",
    benchmark:
        "results/benchmarks/pin_checkpoint/{model}.tsv"
    params:
        checkpoint=checkpoint_arg,
        extra=pin_extra,
    shell:
        "qualflow pin --checkpoint {params.checkpoint} {params.extra} --out {output} > {log} 2>&1"


rule build_bundle:
    """Convert the pinned checkpoint into the runtime bundle for a profile."""
    input:
        pin="results/pin/{model}.json",
    output:
        bundle=directory(f"results/bundle/{SWKEY}/{{model}}/{{profile}}"),
    log:
        f"logs/build_bundle/{SWKEY}/{{model}}/{{profile}}.log",
    benchmark:
        f"results/benchmarks/build_bundle/{SWKEY}/{{model}}/{{profile}}.tsv"
    params:
        software=SOFTWARE_MODEL,
    shell:
        "qualflow build --pin {input.pin} --profile {wildcards.profile} --out {output.bundle} --force"
        " > {log} 2>&1"
