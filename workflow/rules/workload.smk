# Workload points: each model's workloads expanded into its points (qualflow.workload), once for the
# join (every point with its SLO) and once for the serving session (the points only, built from
# what shapes the requests), so that an SLO change reruns the join but not the session.


rule model_settings:
    """What a model's correctness and serving session are told (qualflow.workflow_config): our
    server on the bundle or an external endpoint, and whether requests carry our extensions."""
    output:
        MODEL_SETTINGS,
    log:
        log_of("model_settings", f"{SWKEY}/{{model}}"),
    params:
        settings=get_model_settings,
    localrule: True
    shell:
        "qualflow model-settings --settings {params.settings} --out {output} > {log} 2>&1"


rule workload_points:
    """The plan of a model's workloads: every point (<workload>_c<concurrency>, <workload>_r<rate>)
    and its SLO (the workload's `slo` with `slo_by_load` merged over it), judged by the join."""
    output:
        POINT_PLAN,
    log:
        log_of("workload_points", f"{SWKEY}/{{model}}"),
    params:
        workloads=get_workloads_json(dict),
        flags=get_points_flags,
    localrule: True
    shell:
        "qualflow points --workloads {params.workloads}{params.flags} --out {output} > {log} 2>&1"


rule session_points:
    """The points a model's serving sessions run: the same points, without SLOs, from the part of
    each workload that shapes its requests (the goodput bounds are part of the AIPerf command)."""
    output:
        SESSION_POINTS,
    log:
        log_of("session_points", f"{SWKEY}/{{model}}"),
    params:
        workloads=get_workloads_json(request_settings),
        flags=get_points_flags,
    localrule: True
    shell:
        "qualflow points --workloads {params.workloads}{params.flags} --no-slos --out {output}"
        " > {log} 2>&1"
