# Report: the run report over every model/profile's evidence, the status table, the verdict, and the
# `qualify` target.


rule report:
    """HTML report + matplotlib PNGs over every model/profile's evidence."""
    input:
        runs=all_evidence("runs"),
        summary=all_evidence("summary"),
        requests=all_evidence("requests"),
    output:
        html=report(
            f"{REPORT}/report.html",
            caption="../report/run_report.rst",
            category="qualify",
        ),
    log:
        log_of("report", SWKEY),
    benchmark:
        benchmark_of("report", SWKEY)
    params:
        evidence=evidence_dirs,
        outdir=lambda w, output: str(Path(output.html).parent),
        software=SOFTWARE_EVIDENCE,
    localrule: True
    shell:
        "qualflow report --evidence {params.evidence} --out {params.outdir} > {log} 2>&1"


rule status:
    """The status table over every model/profile's evidence. Its job succeeds whatever the rungs
    reached, so Snakemake keeps the table after a failed `qualify` too."""
    input:
        report=f"{REPORT}/report.html",
        runs=all_evidence("runs"),
    output:
        STATUS,
    log:
        log_of("status", SWKEY),
    params:
        evidence=evidence_dirs,
    localrule: True
    shell:
        "qualflow status --evidence {params.evidence} --out {output} > {log} 2>&1"


rule verdict:
    """The verdict over the status table: fails unless every point reached `require_status` (the
    verdict file is written only then)."""
    input:
        status=STATUS,
    output:
        VERDICT,
    log:
        log_of("qualify", SWKEY),
    params:
        require=config["require_status"],
    localrule: True
    shell:
        "qualflow verdict --status {input.status} --require {params.require} --out {output}"
        " > {log} 2>&1 || (cat {log}; exit 1)"


rule qualify:
    """Target: everything, for every configured model/profile/workload, and the verdict. It also names
    the files the evidence is joined from (measured_inputs), so that one removed since reruns what
    makes it rather than leaving the previous verdict standing."""
    input:
        VERDICT,
        measured_inputs(),
    localrule: True
