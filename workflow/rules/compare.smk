# compare: two software versions' (or runs') evidence side by side. Driven by config:
#
#   compare:
#     base: 0.1.0+gadbe6f2ae1     # VERSION, RUN_ID, VERSION@RUN_ID (see `qualflow evidence list`)
#     head: current               # "current": this DAG's software key (its evidence is built first)
#     force: false                # compare even if dataset, workload or server settings differ (page says so)
#     noise_rel: 0.10             # optional configured noise floor (fraction of base); unset: run-to-run
#     noise_abs_ms: 2.0           #   noise must be measured (>= 2 comparable runs per side) to call a delta
#     default_floor_rel: 0.5      # without either: a delta whose whole CI lies beyond 50 % of base is judged
#
#   snakemake --cores all compare --config 'compare={base: 0.1.0+gadbe6f2ae1, head: current}'
#
# Not part of `qualify`/`all`; only run when asked for.
from qualflow.report.compare_dir import default_out_dir
from qualflow.workflow_config import compare_needs_current

COMPARE = config.get("compare") or {}
COMPARE_SPEC = {s: SWKEY if COMPARE.get(s) == "current" else COMPARE.get(s) or "" for s in ("base", "head")}
COMPARE_DIR = str(default_out_dir(COMPARE_SPEC["base"], COMPARE_SPEC["head"]) if all(COMPARE_SPEC.values())
                  else "results/compare/unset__vs__unset")  # a placeholder until one is configured

rule compare:
    """Compare two versions' evidence: table (parquet), page with CDFs and a delta chart."""
    input:
        lambda w: all_evidence("runs") if compare_needs_current(COMPARE) else [],
    output:
        html=report(
            f"{COMPARE_DIR}/compare.html",
            caption="../report/compare.rst",
            category="compare",
        ),
        cdf=report(f"{COMPARE_DIR}/cdf.png", caption="../report/compare_cdf.rst", category="compare"),
        delta=report(
            f"{COMPARE_DIR}/delta.png", caption="../report/compare_delta.rst", category="compare"
        ),
        table=f"{COMPARE_DIR}/compare.parquet",
        points=f"{COMPARE_DIR}/points.parquet",
        provenance=f"{COMPARE_DIR}/provenance.parquet",
    log:
        f"logs/compare/{Path(COMPARE_DIR).name}.log",
    params:
        base=COMPARE_SPEC["base"],
        head=COMPARE_SPEC["head"],
        force="--force" if COMPARE.get("force") else "",
        floor=" ".join(
            f"--{k.replace('_', '-')} {COMPARE[k]}"
            for k in ("noise_rel", "noise_abs_ms", "default_floor_rel")
            if COMPARE.get(k) is not None
        ),
        outdir=lambda w, output: str(Path(output.table).parent),
    localrule: True
    shell:
        "qualflow compare --base {params.base} --head {params.head} --root results/evidence"
        " --out {params.outdir} {params.floor} {params.force} > {log} 2>&1"
        " || (cat {log}; exit 1)"
