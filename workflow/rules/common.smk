# Config validation, derived names and input functions. All logic lives in src/qualflow: the rules
# reach it through the `qualflow` CLI, and this file calls only the light modules imported below
# (no subprocess of ours while the DAG is parsed); it maps config to paths and arguments.
import json
import os
import shlex
import time
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from qualflow.files import stat_fingerprint
from qualflow.lifetime import pass_signals_to_jobs
from qualflow.report.compare_dir import default_out_dir
from qualflow.report.verdict import print_verdict
from qualflow.session.provenance import workflow_versions
from qualflow.workload import check_workload, request_settings


for _m, _mc in (config.get("models") or {}).items():  # the schema's anyOf, said by key
    if isinstance(_mc, dict) and "checkpoint" not in _mc and "endpoint" not in _mc:
        raise ValueError(
            f"config: models.{_m} names neither 'checkpoint' (our server on that checkpoint) nor "
            "'endpoint' ({url, model, api_key_env?, tokenizer?, launch?}: an external Responses endpoint)"
        )

try:
    validate(config, schema="../schemas/config.schema.yaml")
except WorkflowError as _e:  # only the error that matters, not the schema it was checked against
    _cause = _e.__context__
    if not hasattr(_cause, "message"):
        raise
    _where = ".".join(str(p) for p in getattr(_cause, "absolute_path", ())) or "(top level)"
    raise ValueError(f"config: {_where}: {_cause.message}") from None


def _check_config():
    for m, mc in config["models"].items():
        for w in mc["workloads"]:
            if w not in config["workloads"]:
                raise ValueError(
                    f"config: models.{m}.workloads names {w!r}, which is not under 'workloads' "
                    f"(known: {sorted(config['workloads'])})"
                )
        if "endpoint" in mc and mc.get("profiles", [ENDPOINT_PROFILE]) != [ENDPOINT_PROFILE]:
            raise ValueError(
                f"config: models.{m}.profiles: an endpoint has no build profile; leave it out "
                f"(its evidence is filed under profile {ENDPOINT_PROFILE!r})"
            )
        if "endpoint" in mc:
            mc["profiles"] = [ENDPOINT_PROFILE]
            ceiling = [w for w in mc["workloads"] if config["workloads"][w].get("harness_ceiling")]
            if ceiling:
                raise ValueError(
                    f"config: models.{m} is an endpoint, and workloads {ceiling} have harness_ceiling: the "
                    "ceiling is our server on the synthetic engine, which needs our bundle"
                )
        ck = mc.get("checkpoint")
        local = ck is not None and ck != "embedded" and (os.path.isabs(ck) or Path(ck).exists()
                                                        or ck.startswith((".", "~")))
        if local and not Path(ck).expanduser().is_dir():
            raise ValueError(f"config: models.{m}.checkpoint: no such directory {ck!r}")
        hub = ck is not None and ck != "embedded" and not local
        if hub and not mc["revision"]:
            if not mc["allow_unpinned"]:
                raise ValueError(
                    f"config: models.{m}.revision must be a full commit sha for hub checkpoint "
                    f"{mc['checkpoint']!r} (or set allow_unpinned: true)"
                )
    for w, wc in config["workloads"].items():
        try:
            check_workload(w, wc)
        except ValueError as e:
            raise ValueError(f"config: {e}") from None
        if wc.get("input_file") and not Path(wc["input_file"]).is_file():
            raise ValueError(f"config: workloads.{w}.input_file: no such file {wc['input_file']!r}")


ENDPOINT_PROFILE = "endpoint"  # the profile wildcard of an endpoint model (it has no bundle)
_check_config()

# In-process (qualflow.session.provenance imports nothing heavy; the git state is read by `git`).
_VERSIONS = workflow_versions()
# Evidence and everything measured with this software live under this key.
SWKEY = config["software_key"] or _VERSIONS["software_key"]
DEVICE = config["device"]
# Package versions that change results: params, so an upgrade reruns what it should.
SOFTWARE_MODEL = _VERSIONS["model"]
SOFTWARE_SESSION = _VERSIONS["session"]
SOFTWARE_EVIDENCE = _VERSIONS["evidence"]

MODEL_PROFILES = [(m, p) for m, mc in config["models"].items() for p in mc["profiles"]]

# ---- paths: every rule's outputs live under these prefixes (wildcards left for the rules) ----
CHECKPOINT = "results/checkpoints/{model}"
PIN = "results/pin/{model}.json"
# a model's workload points: the plan (points + SLOs, for the join) and the points a session runs
POINT_PLAN = f"results/points/{SWKEY}/{{model}}/plan.json"
SESSION_POINTS = f"results/points/{SWKEY}/{{model}}/points.json"
BUNDLE = f"results/bundle/{SWKEY}/{{model}}/{{profile}}"
CORRECTNESS = f"results/correctness/{SWKEY}/{{model}}/{{profile}}.parquet"
SESSION = f"results/session/{SWKEY}/{{model}}/{{profile}}"
# raw artifacts of every session, per run id; not a rule output, so a failed rerun never deletes them
SESSION_HISTORY = f"results/session_history/{SWKEY}/{{model}}/{{profile}}"
EVIDENCE = f"results/evidence/{SWKEY}/{{model}}/{{profile}}"
REPORT = f"results/report/{SWKEY}"
STATUS = f"results/status/{SWKEY}.tsv"
VERDICT = f"results/status/{SWKEY}.verdict"  # written only when every point reached require_status
MP = f"{SWKEY}/{{model}}/{{profile}}"  # the key of per-model/profile logs and benchmarks


def log_of(rule, key=MP):
    return f"logs/{rule}/{key}.log"


def benchmark_of(rule, key=MP):
    return f"results/benchmarks/{rule}/{key}.tsv"


def for_each_model_profile(pattern):
    """A path pattern with {model}/{profile} expanded for every configured model/profile."""
    return [pattern.format(model=m, profile=p) for m, p in MODEL_PROFILES]


wildcard_constraints:
    model="|".join(config["models"]),
    profile="[A-Za-z0-9_-]+",


def model_cfg(wildcards):
    return config["models"][wildcards.model]


def model_workloads(model):
    """{name: config} of a model's workloads, in the order the model lists them."""
    return {w: config["workloads"][w] for w in config["models"][model]["workloads"]}


def _workloads_json(model, part):
    """The model's workloads as one JSON object: keys sorted within each, the workloads in the
    model's order (the order of its points)."""
    return shlex.quote(json.dumps({w: json.loads(json.dumps(part(wc), sort_keys=True))
                                   for w, wc in model_workloads(model).items()}))


def plan_workloads_arg(wildcards):
    """`qualflow points --workloads` of the plan: the whole workloads, SLOs included."""
    return _workloads_json(wildcards.model, dict)


def session_workloads_arg(wildcards):
    """`qualflow points --workloads` of the session's points: only what shapes the requests."""
    return _workloads_json(wildcards.model, request_settings)


def points_flags(wildcards):
    return "" if request_extensions(wildcards.model) else " --no-request-extensions"


def prompt_files(wildcards):
    """Prompt files of a model's workloads: inputs of the session, so an edit reruns it."""
    return sorted({wc["input_file"] for wc in model_workloads(wildcards.model).values() if wc.get("input_file")})


def served_name(wildcards):
    return model_cfg(wildcards)["model_name"] or wildcards.model


def is_endpoint(model):
    return "endpoint" in config["models"][model]


def request_extensions(model):
    v = config["models"][model]["request_extensions"]
    return (not is_endpoint(model)) if v is None else bool(v)


def endpoint_arg(wildcards):
    return shlex.quote(json.dumps(model_cfg(wildcards)["endpoint"], sort_keys=True))


def pin_of(wildcards):
    """The pin of a model's checkpoint; none for an endpoint that names no checkpoint."""
    return PIN.format(model=wildcards.model) if model_cfg(wildcards).get("checkpoint") else []


def checkpoint_input(wildcards):
    if model_cfg(wildcards).get("checkpoint") == "embedded":
        return CHECKPOINT.format(model=wildcards.model)
    return []


def checkpoint_arg(wildcards):
    ck = model_cfg(wildcards).get("checkpoint")
    return CHECKPOINT.format(model=wildcards.model) if ck == "embedded" else ck


def correctness_inputs(wildcards):
    """Family correctness: the bundle (our server), or the pin the endpoint claims to serve."""
    if is_endpoint(wildcards.model):
        return {"pin": pin_of(wildcards)}
    return {"bundle": BUNDLE.format(model=wildcards.model, profile=wildcards.profile)}


def correctness_command(wildcards, input, output):
    """The `qualflow` stage and arguments of family correctness for this model."""
    if is_endpoint(wildcards.model):
        pin = f" --pin {input.pin}" if input.get("pin") else ""
        return (f"endpoint-correctness --endpoint {endpoint_arg(wildcards)}{pin} --out {output}"
                f" --startup-timeout {config['server']['startup_timeout_s']} --record-failures")
    return f"correctness --bundle {input.bundle} --device {DEVICE} --out {output} --record-failures"


def session_inputs(wildcards):
    w = {"model": wildcards.model, "profile": wildcards.profile}
    points = {"points": SESSION_POINTS.format(**w)}
    if is_endpoint(wildcards.model):
        return {"correctness": CORRECTNESS.format(**w), **points,
                **({"pin": PIN.format(**w)} if pin_of(wildcards) else {})}
    return {"bundle": BUNDLE.format(**w), "correctness": CORRECTNESS.format(**w), **points}


def session_target(wildcards, input):
    """What the serving session serves: our server on the bundle, or the endpoint."""
    ext = "" if request_extensions(wildcards.model) else " --no-request-extensions"
    if is_endpoint(wildcards.model):
        pin = f" --pin {input.pin}" if input.get("pin") else ""
        return f"--endpoint {endpoint_arg(wildcards)}{pin}{ext}"
    return f"--bundle {input.bundle}{ext}"


def bundle_state(wildcards):
    """A param of the jobs that load the bundle: a stat fingerprint of its files (path, size, mtime;
    no file is read). Snakemake does not see a file change inside a directory() output (its mtime is
    the .snakemake_timestamp written when the job ended), so without it a bundle edited after a good
    run, or rebuilt by hand, would leave its evidence standing; with it those jobs rerun, and the
    bundle's verified load refuses a bundle that no longer matches its manifest. Snakemake records
    the value the job ran with, so a plain rerun afterwards has nothing to do."""
    if is_endpoint(wildcards.model):
        return ""
    return stat_fingerprint(BUNDLE.format(model=wildcards.model, profile=wildcards.profile))


def measured_inputs():
    """Every file the evidence is joined from (each model/profile's session outputs and correctness
    table): inputs of the `qualify` target itself, so that one removed since (a serving session cut
    off on a rerun: Snakemake removes a failed job's outputs, and does not by itself rerun a job for
    an intermediate file that went missing while what was built from it is still there) reruns the
    job that makes it and everything downstream, instead of leaving the previous verdict standing."""
    return [*all_session("session.json"), *all_session("server_timing.jsonl"), *all_session("points"),
            *for_each_model_profile(CORRECTNESS)]


def join_inputs(wildcards):
    w = {"model": wildcards.model, "profile": wildcards.profile}
    extra = {} if is_endpoint(wildcards.model) else {"bundle": BUNDLE.format(**w)}
    if pin_of(wildcards):
        extra["pin"] = PIN.format(**w)
    return extra


def join_artifacts(wildcards, input):
    return " ".join(f"--{k} {input.get(k)}" for k in ("bundle", "pin") if input.get(k))


def pin_extra(wildcards):
    mc = model_cfg(wildcards)
    args = []
    if mc["revision"]:
        args += ["--revision", mc["revision"]]
    if mc["allow_unpinned"]:
        args.append("--allow-unpinned")
    return shlex.join(args)


def thresholds_arg(wildcards):
    v = model_cfg(wildcards)["thresholds_version"]
    return f"--thresholds-version {shlex.quote(v)}" if v else ""


def gpus(wildcards):
    """The `gpu` resource of a GPU rule: the SLURM executor maps it to --gpus (with the profile's
    gpu_model: --gpus=<model>:1); locally only `--resources gpu=N` enforces it."""
    return 1 if DEVICE.startswith("cuda") else 0


def job_threads(key):
    """Threads (cores) of a heavy job, from config `threads.<key>`. 0: every core of the machine,
    which locally Snakemake caps at --cores, so the job runs alone (nothing else competes with a
    measurement); a cluster profile's `set-threads` decides the cores per job there. Never
    `workflow.cores`, which needs --cores and so breaks cluster executors."""
    return config["threads"][key] or len(os.sched_getaffinity(0))


def all_evidence(table="runs"):
    return for_each_model_profile(f"{EVIDENCE}/{table}.parquet")


def evidence_dirs(wildcards, input):
    return " ".join(str(Path(f).parent) for f in input.runs)


def all_session(name):
    return for_each_model_profile(f"{SESSION}/{name}")


# compare (workflow/rules/compare.smk): config `compare: {base, head, force, noise_rel}`
COMPARE = config.get("compare") or {}


def _compare_spec(side):
    v = COMPARE.get(side) or ""
    return SWKEY if v == "current" else v


def _compare_dir():
    """The compare output dir (named as `qualflow compare` names it); a placeholder until a
    comparison is configured."""
    base, head = _compare_spec("base"), _compare_spec("head")
    return str(default_out_dir(base, head)) if base and head else "results/compare/unset__vs__unset"


COMPARE_DIR = _compare_dir()


def compare_inputs(wildcards):
    if not COMPARE.get("base") or not COMPARE.get("head"):
        raise ValueError(
            "config: compare.base and compare.head must be set to run `compare`, e.g. "
            "--config 'compare={base: <VERSION>, head: current}' (versions: `qualflow evidence list`)"
        )
    # "current" is produced by this DAG; other versions must already be in results/evidence
    if "current" in (COMPARE.get("base"), COMPARE.get("head")):
        return all_evidence("runs")
    return []


# The terminal ends with the verdict (the Snakefile's onsuccess/onerror): the status table (rung,
# figures, why not further) and the report's (and compare page's) path; after a failure only a
# table this run wrote is shown as its verdict.
STARTED = []   # the run's start (time.time()), set in onstart


def show_verdict(failed):
    compare = f"{COMPARE_DIR}/compare.html"
    print_verdict(STATUS, report=f"{REPORT}/report.html", compare=compare if Path(compare).exists() else None,
                  written_after=STARTED[0] if failed and STARTED else None)
