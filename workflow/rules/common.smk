# Config validation, paths, wildcard constraints, input functions. The logic is in src/qualflow (the
# rules call the `qualflow` CLI); this file imports only light modules and maps config to paths.
import json
import os
import shlex
from pathlib import Path

from qualflow.files import stat_fingerprint
from qualflow.session.provenance import workflow_versions
from qualflow.workflow_config import check_config, request_extensions, serving_settings
from qualflow.workload import request_settings

check_config(config, Path(workflow.basedir) / "schemas" / "config.schema.yaml")

_VERSIONS = workflow_versions()  # in-process; the git state is read by `git`
# Evidence and everything measured with this software live under this key.
SWKEY = config["software_key"] or _VERSIONS["software_key"]
DEVICE = config["device"]
SOFTWARE_MODEL = _VERSIONS["model"]  # versions that change results: params, so an upgrade reruns
SOFTWARE_SESSION = _VERSIONS["session"]
SOFTWARE_EVIDENCE = _VERSIONS["evidence"]

MODEL_PROFILES = [(m, p) for m, mc in config["models"].items() for p in mc["profiles"]]

# ---- paths: every rule's outputs live under these prefixes (wildcards left for the rules) ----
CHECKPOINT = "results/checkpoints/{model}"
PIN = "results/pin/{model}.json"
# a model's workload points: the plan (points + SLOs, for the join) and the points a session runs
POINT_PLAN = f"results/points/{SWKEY}/{{model}}/plan.json"
SESSION_POINTS = f"results/points/{SWKEY}/{{model}}/points.json"
# what a model's correctness and session are told: our bundle or an endpoint, request extensions
MODEL_SETTINGS = f"results/points/{SWKEY}/{{model}}/serving.json"
BUNDLE = f"results/bundle/{SWKEY}/{{model}}/{{profile}}"
CORRECTNESS = f"results/correctness/{SWKEY}/{{model}}/{{profile}}.parquet"
SESSION = f"results/session/{SWKEY}/{{model}}/{{profile}}"
SESSION_HISTORY = f"results/session_history/{SWKEY}/{{model}}/{{profile}}"  # no output: kept
EVIDENCE = f"results/evidence/{SWKEY}/{{model}}/{{profile}}"
REPORT = f"results/report/{SWKEY}"
STATUS = f"results/status/{SWKEY}.tsv"
VERDICT = f"results/status/{SWKEY}.verdict"  # written only when every point reached require_status
MP = f"{SWKEY}/{{model}}/{{profile}}"  # the key of per-model/profile logs and benchmarks

wildcard_constraints:
    model="|".join(config["models"]),
    profile="[A-Za-z0-9_-]+",


def log_of(rule, key=MP):
    return f"logs/{rule}/{key}.log"


def benchmark_of(rule, key=MP):
    return f"results/benchmarks/{rule}/{key}.tsv"


def for_each_model_profile(pattern):  # one path per configured model/profile
    return [pattern.format(model=m, profile=p) for m, p in MODEL_PROFILES]


def model_cfg(wildcards):
    return config["models"][wildcards.model]


def get_workloads_json(part):  # `part` of each workload (keys sorted), in the model's order
    return lambda w: shlex.quote(json.dumps({n: json.loads(json.dumps(part(config["workloads"][n]),
                                                                      sort_keys=True))
                                             for n in model_cfg(w)["workloads"]}))


def get_points_flags(wildcards):
    return "" if request_extensions(model_cfg(wildcards)) else " --no-request-extensions"


def get_model_settings(wildcards):
    return shlex.quote(json.dumps(serving_settings(model_cfg(wildcards)), sort_keys=True))


def get_prompt_files(wildcards):  # inputs of the session, so an edit reruns it
    files = {config["workloads"][n].get("input_file") for n in model_cfg(wildcards)["workloads"]}
    return sorted(files - {None})


def get_pin(wildcards):  # none for an endpoint that names no checkpoint
    return PIN.format(model=wildcards.model) if model_cfg(wildcards).get("checkpoint") else []


def get_pin_flags(wildcards):
    mc = model_cfg(wildcards)
    return shlex.join([*(["--revision", mc["revision"]] if mc["revision"] else []),
                       *(["--allow-unpinned"] if mc["allow_unpinned"] else [])])


def get_thresholds_flag(wildcards):
    v = model_cfg(wildcards)["thresholds_version"]
    return f"--thresholds-version {shlex.quote(v)}" if v else ""


def get_checkpoint(wildcards):  # what `qualflow pin` is given (the embedded one: a rule's output)
    ck = model_cfg(wildcards).get("checkpoint")
    return CHECKPOINT.format(model=wildcards.model) if ck == "embedded" else ck


def get_served(wildcards):  # what is served: our bundle, or an endpoint's pin (what it claims)
    if "endpoint" not in model_cfg(wildcards):
        return {"bundle": BUNDLE.format(model=wildcards.model, profile=wildcards.profile)}
    return {"pin": get_pin(wildcards)} if get_pin(wildcards) else {}


def get_join_artifacts(wildcards):
    return {**get_served(wildcards), **({"pin": get_pin(wildcards)} if get_pin(wildcards) else {})}


def artifact_flags(wildcards, input):
    return " ".join(f"--{k} {input.get(k)}" for k in ("bundle", "pin") if input.get(k))


def get_bundle_state(wildcards):  # the bundle's stat fingerprint: a changed file reruns (files.py)
    if "endpoint" in model_cfg(wildcards):
        return ""
    return stat_fingerprint(BUNDLE.format(model=wildcards.model, profile=wildcards.profile))


def get_gpus(wildcards):  # the `gpu` resource (SLURM: --gpus; locally only `--resources gpu=N`)
    return 1 if DEVICE.startswith("cuda") else 0


def job_threads(key):  # `threads.<key>`, 0: every core (never workflow.cores: breaks cluster runs)
    return config["threads"][key] or len(os.sched_getaffinity(0))


def all_evidence(table="runs"):
    return for_each_model_profile(f"{EVIDENCE}/{table}.parquet")


def all_session(name):
    return for_each_model_profile(f"{SESSION}/{name}")


def evidence_dirs(wildcards, input):
    return " ".join(str(Path(f).parent) for f in input.runs)


def measured_inputs():
    """Every file the evidence is joined from: inputs of `qualify`, so that one removed since (a
    session cut off on a rerun) reruns what makes it rather than leaving the old verdict standing."""
    return [*all_session("session.json"), *all_session("server_timing.jsonl"), *all_session("points"),
            *for_each_model_profile(CORRECTNESS)]
