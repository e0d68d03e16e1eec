"""The settings a session records (session.json's `settings`, copied into
`runs.server_settings`): our server's engine settings or the endpoint's launch, and the client
side's."""

from __future__ import annotations

from qualflow.configs import as_dict, defaults, hidden
from qualflow.runtime.config import EngineConfig

from .config import SessionConfig
from .state import N_KEYS


def engine_settings(engine: EngineConfig) -> dict:
    """The engine settings a session records: the device; the engine's mode resolved for it
    (engine_process "on"/"off", even at the default "auto", so the evidence says how it was served);
    max_batch, max_context and cpu_threads, null at their defaults (the server's own); and every
    other field set away from its default (test-only knobs aside)."""
    base, test_only = defaults(EngineConfig), hidden(EngineConfig)
    device_type = engine.device.split(":")[0]
    out: dict = {
        "device": engine.device,
        "engine_process": "on" if engine.in_own_process(device_type) else "off",
    }
    for k in ("max_batch", "max_context", "cpu_threads"):
        out[k] = None if getattr(engine, k) == base[k] else getattr(engine, k)
    out.update(
        {
            k: v
            for k, v in as_dict(engine).items()
            if k not in out and k not in test_only and v != base[k]
        }
    )
    if engine.engine_kind == "synthetic":  # the ceiling's clock, also at its default
        out["step_ms"] = engine.step_ms
    return out


def session_settings(cfg: SessionConfig, endpoint_launched: bool | None) -> dict:
    """session.json's `settings` (copied into `runs.server_settings`): our server's engine settings,
    or the endpoint's launch; the client side's; request_extensions only when they are off.
    `endpoint_launched`: None for our server."""
    common = {
        "aiperf_workers": cfg.aiperf_workers,
        "aiperf_record_processors": cfg.aiperf_record_processors,
        "warmup_requests": cfg.warmup_requests,
        "warmup_max_tokens": cfg.warmup_max_tokens,
        "protocol_checks": cfg.protocol,
    }
    if endpoint_launched is None:
        settings = {**engine_settings(cfg.engine), **common}
        if (
            cfg.api_server_count != 1
        ):  # absent: one API process (as every run recorded before the setting)
            settings.update(api_server_count=cfg.api_server_count, engine_process="on")
    else:
        settings = {"stack": "endpoint", "endpoint_launched": endpoint_launched, **common}
    if not cfg.request_extensions:
        settings["request_extensions"] = False
    if cfg.state:  # our server's backend (its /health then says which), or the endpoint's own
        ours = endpoint_launched is None
        settings.update(
            store="sqlite" if ours else "endpoint", **({"api_keys": N_KEYS} if ours else {})
        )
    if cfg.reasoning_budgets is not None:
        settings["reasoning_budgets"] = list(cfg.reasoning_budgets)
    return settings
