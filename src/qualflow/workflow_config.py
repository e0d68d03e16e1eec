"""The workflow's config (config/config.yaml, workflow/schemas/config.schema.yaml): its checks, and
the serving settings of one model that the stages read.

`check_config` is what the workflow calls while the DAG is parsed: the schema (its defaults filled
in), said in one line naming the key, and the checks the schema cannot make (cross-references,
files on disk, what an endpoint model may not ask for). Every error is a ValueError whose message
starts with `config: <key>`.

`serving_settings` is what decides between our server on a bundle and an external endpoint: the
workflow writes it to a file per model (`qualflow model-settings`), and `qualflow correctness` and
`qualflow session` read it (`read_serving_settings`) and choose. Light at import: nothing heavy, so
the DAG parse stays fast."""

from __future__ import annotations

import json
import os
from pathlib import Path

from qualflow.workload import check_workload

ENDPOINT_PROFILE = "endpoint"  # the profile wildcard of an endpoint model (it has no bundle)


def check_config(config: dict, schema: str | Path) -> None:
    """Validate `config` against `schema` (absolute path; the schema's defaults are filled in), then
    the cross-references and files it names. An endpoint model gets the one profile
    ENDPOINT_PROFILE. Raises ValueError naming the key."""
    _name_checkpoint_or_endpoint(config)
    _validate_schema(config, schema)
    for m, mc in config["models"].items():
        _check_model(config, m, mc)
    for w, wc in config["workloads"].items():
        try:
            check_workload(w, wc)
        except ValueError as e:
            raise ValueError(f"config: {e}") from None
        for key in ("input_file", "inputs_json"):
            if wc.get(key) and not Path(wc[key]).is_file():
                raise ValueError(f"config: workloads.{w}.{key}: no such file {wc[key]!r}")


def _name_checkpoint_or_endpoint(config: dict) -> None:
    """The schema's anyOf (checkpoint or endpoint), said by key rather than as the schema's
    error."""
    for m, mc in (config.get("models") or {}).items():
        if isinstance(mc, dict) and "checkpoint" not in mc and "endpoint" not in mc:
            raise ValueError(
                f"config: models.{m} names neither 'checkpoint' (our server on that checkpoint) "
                "nor 'endpoint' ({url, model, api_key_env?, tokenizer?, launch?}: an external "
                "Responses endpoint)"
            )


def _validate_schema(config: dict, schema: str | Path) -> None:
    """Snakemake's validate (it fills in the defaults); of its error, only the one that matters,
    not the schema it was checked against."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(config, schema=str(schema))
    except WorkflowError as e:
        cause = e.__context__
        if not hasattr(cause, "message"):
            raise
        where = ".".join(str(p) for p in getattr(cause, "absolute_path", ())) or "(top level)"
        raise ValueError(f"config: {where}: {cause.message}") from None


def _check_model(config: dict, m: str, mc: dict) -> None:
    for w in mc["workloads"]:
        if w not in config["workloads"]:
            raise ValueError(
                f"config: models.{m}.workloads names {w!r}, which is not under 'workloads' "
                f"(known: {sorted(config['workloads'])})"
            )
    chained = [w for w in mc["workloads"] if config["workloads"][w].get("chaining") is not None]
    if chained and not mc.get("state"):
        raise ValueError(
            f"config: models.{m}.state: workloads {chained} chain their turns with "
            "previous_response_id (workloads.<w>.chaining), which needs the model served with "
            f"stored state; set models.{m}.state: true or leave them out of its workloads"
        )
    if "endpoint" in mc:
        _check_endpoint_model(config, m, mc)
    ck = mc.get("checkpoint")
    local = (
        ck is not None
        and ck != "embedded"
        and (os.path.isabs(ck) or Path(ck).exists() or ck.startswith((".", "~")))
    )
    if local and not Path(ck).expanduser().is_dir():
        raise ValueError(f"config: models.{m}.checkpoint: no such directory {ck!r}")
    hub = ck is not None and ck != "embedded" and not local
    if hub and not mc["revision"] and not mc["allow_unpinned"]:
        raise ValueError(
            f"config: models.{m}.revision must be a full commit sha for hub checkpoint "
            f"{mc['checkpoint']!r} (or set allow_unpinned: true)"
        )


def _check_endpoint_model(config: dict, m: str, mc: dict) -> None:
    if mc.get("profiles", [ENDPOINT_PROFILE]) != [ENDPOINT_PROFILE]:
        raise ValueError(
            f"config: models.{m}.profiles: an endpoint has no build profile; leave it out "
            f"(its evidence is filed under profile {ENDPOINT_PROFILE!r})"
        )
    mc["profiles"] = [ENDPOINT_PROFILE]
    for key, why in (
        ("harness_ceiling", "the ceiling is our server on the synthetic engine"),
        ("cache_off_rerun", "the rerun is our server with --no-prefix-caching"),
    ):
        asked = [w for w in mc["workloads"] if config["workloads"][w].get(key)]
        if asked:
            raise ValueError(
                f"config: models.{m} is an endpoint, and workloads {asked} have {key}: {why}, "
                "which needs our bundle"
            )


def compare_needs_current(compare: dict) -> bool:
    """Whether `compare` (config `compare: {base, head, ...}`) names "current", the evidence this
    DAG produces (other versions must already be in results/evidence). Raises where base or head is
    unset: the compare rule was asked for without a comparison."""
    if not compare.get("base") or not compare.get("head"):
        raise ValueError(
            "config: compare.base and compare.head must be set to run `compare`, e.g. "
            "--config 'compare={base: <VERSION>, head: current}' "
            "(versions: `qualflow evidence list`)"
        )
    return "current" in (compare["base"], compare["head"])


def is_endpoint(model_config: dict) -> bool:
    return "endpoint" in model_config


def request_extensions(model_config: dict) -> bool:
    """Whether requests carry qualflow's extensions: as configured, else only to our own server."""
    v = model_config.get("request_extensions")
    return (not is_endpoint(model_config)) if v is None else bool(v)


def serving_settings(model_config: dict) -> dict:
    """What a model's correctness and session stages are told: the endpoint (None: our server on
    the bundle) and whether requests carry qualflow's extensions."""
    return {
        "endpoint": model_config.get("endpoint"),
        "request_extensions": request_extensions(model_config),
    }


def read_serving_settings(path: str | Path) -> dict:
    """The settings `qualflow model-settings` wrote; a ValueError naming the file otherwise."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a model's serving settings ({e})") from None
    if not isinstance(data, dict) or set(data) != {"endpoint", "request_extensions"}:
        raise ValueError(f"{path}: expected {{endpoint, request_extensions}}, got {data!r}")
    return data


def add_model_settings_args(s) -> None:
    s.add_argument(
        "--settings",
        required=True,
        help="JSON {endpoint, request_extensions}: the model's serving settings",
    )
    s.add_argument("--out", required=True)


def main_model_settings(a) -> int:
    """`qualflow model-settings`: write a model's serving settings for its stages to read."""
    try:
        data = json.loads(a.settings)
    except json.JSONDecodeError as e:
        raise ValueError(f"--settings: not JSON ({e})") from None
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    read_serving_settings(a.out)  # refuse what a stage would refuse, now
    return 0
