# qualflow: `snakemake --cores all qualify` pins the checkpoint, builds the bundle, runs family
# correctness, serves it (warm-up, protocol checks, AIPerf points in one serving session), joins
# client and server timing into versioned evidence tables and writes the report.
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


# The embedded default; a --configfile (e.g. config/qwen3-0.6b-fp16.yaml) replaces it instead of
# being merged into it (otherwise the two configs' models would both run).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/artifacts.smk"
include: "workflow/rules/correctness.smk"
include: "workflow/rules/session.smk"
include: "workflow/rules/evidence.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/compare.smk"


rule all:
    default_target: True
    input:
        rules.qualify.output,
