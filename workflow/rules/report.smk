# Report: the run report over every model/profile's evidence, and the status table (`qualify`).


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


rule qualify:
    """Target: everything, for every configured model/profile/workload; writes the status table and
    fails unless every point reached `require_status`."""
    input:
        report=f"{REPORT}/report.html",
        runs=all_evidence("runs"),
    output:
        STATUS,
    log:
        log_of("qualify", SWKEY),
    params:
        evidence=evidence_dirs,
        require=config["require_status"],
    localrule: True
    shell:
        "qualflow status --evidence {params.evidence} --require {params.require} --out {output}"
        " > {log} 2>&1 || (cat {log}; exit 1)"
