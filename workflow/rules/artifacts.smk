# Artifacts: the embedded default checkpoint, the pin of a checkpoint, and its bundle per profile.


rule embedded_checkpoint:
    """The embedded default checkpoint (seeded random Qwen3 weights + real Qwen tokenizer), offline."""
    output:
        directory(CHECKPOINT),
    log:
        log_of("embedded_checkpoint", "{model}"),
    benchmark:
        benchmark_of("embedded_checkpoint", "{model}")
    params:
        preset=lambda w: model_cfg(w)["embedded_preset"],
        software=SOFTWARE_MODEL,
    localrule: True
    shell:
        "qualflow embedded --out {output} --preset {params.preset} > {log} 2>&1"


rule pin_checkpoint:
    """Resolve the checkpoint to an immutable identity (hub repo at a full commit sha, or a local dir
    with the sha256 of every file)."""
    input:
        lambda w: CHECKPOINT.format(model=w.model) if model_cfg(w)["checkpoint"] == "embedded" else [],
    output:
        PIN,
    log:
        log_of("pin_checkpoint", "{model}"),
    benchmark:
        benchmark_of("pin_checkpoint", "{model}")
    params:
        checkpoint=get_checkpoint,
        extra=get_pin_flags,
    localrule: True
    shell:
        "qualflow pin --checkpoint {params.checkpoint} {params.extra} --out {output} > {log} 2>&1"


rule build_bundle:
    """Convert the pinned checkpoint into the runtime bundle for a profile."""
    input:
        pin=PIN,
    output:
        bundle=directory(BUNDLE),
    log:
        log_of("build_bundle"),
    benchmark:
        benchmark_of("build_bundle")
    params:
        software=SOFTWARE_MODEL,
    shell:
        "qualflow build --pin {input.pin} --profile {wildcards.profile} --out {output.bundle} --force"
        " > {log} 2>&1"
