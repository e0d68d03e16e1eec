"""SessionConfig: one serving session (`qualflow session`). The field defaults are the only
defaults; the flags are generated from the fields (qualflow.configs), the engine's
(`EngineConfig`) beside them. The server the session starts runs with exactly `engine`."""

from __future__ import annotations

from dataclasses import dataclass

from qualflow.configs import setting
from qualflow.runtime.config import EngineConfig
from qualflow.workload import PointPlan

from .points import read_points


@dataclass(frozen=True)
class SessionConfig:
    out: str = setting(help="session directory")
    points: str = setting(
        help="points.json (its points, and their SLOs for the join), or a JSON list of points "
        "(inline or in a file)"
    )
    bundle: str | None = setting(None, help="our server on this bundle (or --endpoint)")
    model_settings: str | None = setting(
        None,
        help="the model's serving settings (qualflow model-settings): they decide --endpoint and "
        "--request-extensions (our server on --bundle where they name no endpoint)",
    )
    endpoint: str | None = setting(
        None,
        help="JSON {url, model, api_key_env?, tokenizer?, launch?, reasoning?, reasoning_budget?}: "
        "qualify that endpoint",
    )
    checkpoint: str | None = setting(
        None, help="pinned checkpoint dir of an endpoint (tokenizer, {checkpoint} in launch)"
    )
    pin: str | None = setting(
        None,
        help="pin.json of the checkpoint an endpoint claims to serve (instead of --checkpoint)",
    )
    request_extensions: bool = setting(
        True,
        help="send qualflow's request extensions (ignore_eos / min_tokens); "
        "--no-request-extensions: standard Responses fields only",
    )
    reasoning_budgets: tuple[int, int, int, int] | None = setting(
        None,
        metavar=("MINIMAL", "LOW", "MEDIUM", "HIGH"),
        help="our server's thinking budget of each reasoning.effort, 0 = unbounded "
        "(default: the family's)",
    )
    host: str = setting("127.0.0.1", help="address our server binds")
    port: int = setting(0, help="our server's port (0: pick a free port)")
    model_name: str = setting("qualflow", help="the model name our server serves")
    startup_timeout: float = setting(600.0, help="seconds the server may take to become healthy")
    warmup_requests: int = setting(4, help="warm-up requests before the measurement")
    warmup_max_tokens: int = setting(16, help="max_output_tokens of each warm-up request")
    aiperf_workers: int = setting(1, help="AIPerf --workers-max")
    aiperf_record_processors: int = setting(1, help="AIPerf --record-processors")
    aiperf_timeout: float = setting(3600.0, help="seconds one AIPerf run may take")
    protocol: bool = setting(
        True, help="run the Responses protocol checks (--no-protocol: skip them)"
    )
    record_failures: bool = setting(
        False, help="a failed stage is recorded in session.json and every output is written; exit 0"
    )
    allow_unpinned_client: bool = setting(
        False,
        help="run with an aiperf/openai that is not the pinned version "
        "(caps the status, with the reason)",
    )
    run_name: tuple[str, str] | None = setting(
        None,
        metavar=("MODEL", "PROFILE"),
        help="name the evidence run id (MODEL.PROFILE.<start time>), recorded in session.json",
    )
    archive_dir: str | None = setting(
        None, help="also keep the session's raw artifacts under ARCHIVE_DIR/<run id>/"
    )
    ceiling_step_ms: float = setting(
        1.0,
        help="step clock in ms of the harness-ceiling server (the synthetic engine), which runs "
        "the points marked harness_ceiling again after the stack's; 1 ms is faster than any "
        "engine step measured here (a model's c1 Task step on a GPU is longer), so the ceiling is "
        "the serving path's, not the clock's",
    )
    api_server_count: int = setting(
        1,
        help="our server's API (HTTP) processes in front of its one engine process (qualflow serve "
        "--api-server-count); recorded in the settings when above 1",
    )
    ceiling_api_server_count: int = setting(
        1,
        help="the harness-ceiling server's API processes (its synthetic engine runs in one engine "
        "process behind them when above 1)",
    )
    state: bool = setting(
        False,
        help="serve with stored state: our server gets a response store (a SQLite file under "
        "--out) and two API keys made for the session; an endpoint is said to store. The state "
        "protocol checks run (session.state_checks)",
    )
    tools: bool = setting(
        False,
        help="an endpoint serves function tools: the tool protocol checks run "
        "(session.tool_checks; our server's /health says so itself)",
    )
    engine: EngineConfig = EngineConfig()

    def __post_init__(self):
        for key in ("api_server_count", "ceiling_api_server_count"):
            if getattr(self, key) < 1:
                raise ValueError(
                    f"{key} (--{key.replace('_', '-')}) "
                    f"must be at least 1, not {getattr(self, key)}"
                )

    def plan(self) -> PointPlan:
        return read_points(self.points)
