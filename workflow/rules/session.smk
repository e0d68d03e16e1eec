# The serving session: ONE job per model/profile owns the server's whole lifetime:
#
#   serve (start + /health with timeout; load/startup times -> startup.json)
#     -> warmup (fixed requests, each with its own X-Request-ID -> warmup.parquet)
#     -> protocol_checks (openai SDK conformance checks -> protocol.parquet)
#     -> AIPerf point 1..N, sequentially (points/<point>/aiperf + command.sh + run.json)
#     -> the harness ceiling, where a workload has harness_ceiling: the same points against a
#        synthetic-engine server (ceiling/; qualflow.session.ceiling)
#     -> stop (finally; also on Ctrl-C/SIGTERM, and if Snakemake itself dies: PDEATHSIG)
#
# Not Snakemake `service()` jobs, because their consumers start simultaneously (warm-up, protocol
# checks and all AIPerf points would load the server at once and measure each other), the service
# plus every consumer must fit into --cores at once (#3035), consumers only wait --latency-wait for
# the service marker (#2816), a crashed service is not noticed, a failing consumer gets the service
# shell SIGKILLed (orphaning a background server), and on SLURM a service group must run in one
# allocation whose members run sequentially (#4223). `qualflow session` is started with `exec`, so
# the job's signals reach it directly (a signal to Snakemake's PID alone is passed on to the jobs by
# the Snakefile's `onstart`); it detects a busy port and names it, notices a crashed
# server in every stage, and always stops the server and waits until its port is free.
#
# Reruns: the rule is named `aiperf_profile`, so `snakemake -R aiperf_profile` reruns the session
# (a restarted server is started, warmed and checked again, then all AIPerf points) and everything
# downstream (join, report, status), never pin/build/correctness. `serve`, `warmup` and
# `protocol_checks` are target rules naming the session's per-stage outputs.


rule aiperf_profile:
    """Serving session for one model/profile: serve -> warmup -> protocol_checks -> AIPerf points."""
    input:
        unpack(get_served),
        settings=MODEL_SETTINGS,
        correctness=CORRECTNESS,
        points=SESSION_POINTS,
        prompts=get_prompt_files,
    output:
        session=f"{SESSION}/session.json",
        startup=f"{SESSION}/startup.json",
        warmup=f"{SESSION}/warmup.parquet",
        protocol=f"{SESSION}/protocol.parquet",
        timing=f"{SESSION}/server_timing.jsonl",
        provenance=f"{SESSION}/provenance.json",
        points=directory(f"{SESSION}/points"),
    log:
        log_of("aiperf_profile"),
    benchmark:
        benchmark_of("aiperf_profile")
    params:
        outdir=lambda w, output: str(Path(output.session).parent),
        model_name=lambda w: model_cfg(w)["model_name"] or w.model,
        device=DEVICE,
        host=config["server"]["host"],
        port=config["server"]["port"],
        max_batch=config["server"]["max_batch"],
        max_context=config["server"]["max_context"],
        cpu_threads=config["server"]["cpu_threads"],
        startup_timeout=config["server"]["startup_timeout_s"],
        ceiling_step_ms=config["server"]["ceiling_step_ms"],
        api_servers=config["server"]["api_server_count"],
        ceiling_api_servers=config["server"]["ceiling_api_server_count"],
        warmup_requests=config["warmup"]["requests"],
        warmup_max_tokens=config["warmup"]["max_output_tokens"],
        protocol="" if config["protocol_checks"] else "--no-protocol",
        state=lambda w: "--state" if model_cfg(w).get("state") else "",
        tools=lambda w: "--tools" if model_cfg(w).get("tools") else "",
        aiperf_workers=config["aiperf"]["workers_max"],
        aiperf_rp=config["aiperf"]["record_processors"],
        aiperf_timeout=config["aiperf"]["timeout_s"],
        unpinned_client="--allow-unpinned-client" if config["allow_unpinned_client"] else "",
        archive=lambda w: SESSION_HISTORY.format(model=w.model, profile=w.profile),
        artifacts=artifact_flags,
        software=SOFTWARE_SESSION,
        bundle=get_bundle_state,
    threads: job_threads("session")
    resources:
        gpu=get_gpus,
    shell:
        "exec qualflow session --model-settings {input.settings} {params.artifacts} --out {params.outdir} --points {input.points}"
        " --model-name {params.model_name} --device {params.device} --host {params.host}"
        " --port {params.port} --max-batch {params.max_batch} --max-context {params.max_context}"
        " --cpu-threads {params.cpu_threads}"
        " --startup-timeout {params.startup_timeout} --ceiling-step-ms {params.ceiling_step_ms}"
        " --api-server-count {params.api_servers} --ceiling-api-server-count {params.ceiling_api_servers}"
        " --warmup-requests {params.warmup_requests}"
        " --warmup-max-tokens {params.warmup_max_tokens} {params.protocol} {params.state} {params.tools}"
        " --aiperf-workers {params.aiperf_workers} --aiperf-record-processors {params.aiperf_rp}"
        " --aiperf-timeout {params.aiperf_timeout} {params.unpinned_client} --record-failures"
        " --run-name {wildcards.model} {wildcards.profile} --archive-dir {params.archive} > {log} 2>&1"


rule serve:
    """Target: server started, healthy, load/startup times recorded (inside the serving session)."""
    input:
        all_session("startup.json"),


rule warmup:
    """Target: warm-up requests sent and recorded by request id (inside the serving session)."""
    input:
        all_session("warmup.parquet"),


rule protocol_checks:
    """Target: Responses conformance checks (inside the serving session)."""
    input:
        all_session("protocol.parquet"),
