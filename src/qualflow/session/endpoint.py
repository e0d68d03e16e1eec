"""An external Responses endpoint as a serving session's server: vLLM, SGLang, `transformers serve`,
a hosted API, or our own server started by someone else.

`EndpointSpec` is the config's `endpoint:` (url, model, api_key_env, tokenizer, reasoning,
reasoning_budget) plus an optional `launch` command: then the session starts that process itself and
owns its lifetime exactly as it owns our server (own process group, PDEATHSIG, stopped in `finally`,
port free afterwards). `{port}` in url/model/launch is replaced by a free port, `{checkpoint}` by
the pinned checkpoint dir.

`implemented` for an endpoint means: reachable, and `GET /v1/models` names the configured model."""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from .server_process import OwnedServer, ServerError, free_port, http_get_json


class EndpointError(ServerError):
    pass


@dataclass(frozen=True)
class EndpointSpec:
    url: str
    model: str
    api_key_env: str | None = None
    tokenizer: str | None = None
    launch: tuple[str, ...] = field(default_factory=tuple)
    reasoning: bool = False  # it serves thinking (`reasoning: {effort}`): the reasoning checks run
    reasoning_budget: int | None = (
        None  # its reasoning-token budget for effort `minimal`, if it has one
    )

    @classmethod
    def from_json(cls, text: str) -> EndpointSpec:
        d = json.loads(text)
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"endpoint: unknown keys {sorted(unknown)}")
        if not d.get("url") or not d.get("model"):
            raise ValueError("endpoint: url and model are required")
        return cls(**{**d, "launch": tuple(d.get("launch") or ())})

    def api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EndpointError(
                f"endpoint.api_key_env names {self.api_key_env}, "
                "which is not set in the environment"
            )
        return key


def served_models(
    url: str, api_key: str | None = None, timeout: float = 5.0
) -> tuple[int, list[str]]:
    """(HTTP status, model ids) of `GET <url>/v1/models`."""
    if not api_key:
        status, body = http_get_json(url.rstrip("/") + "/v1/models", timeout=timeout)
    else:
        req = urllib.request.Request(
            url.rstrip("/") + "/v1/models", headers={"Authorization": f"Bearer {api_key}"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, body = r.status, json.loads(r.read() or b"null")
    ids = (
        [m.get("id") for m in (body or {}).get("data", []) if isinstance(m, dict)]
        if isinstance(body, dict)
        else []
    )
    return status, ids


class EndpointProcess(OwnedServer):
    """The session's handle on an endpoint, with OwnedServer's interface. Without `launch` there is
    no process to own (start/stop do nothing); health is `/v1/models` naming the model."""

    def __init__(
        self, spec: EndpointSpec, *, log_path: str | Path, checkpoint_dir: str | None = None
    ):
        needs_port = "{port}" in spec.url or any("{port}" in a for a in spec.launch)
        host = urllib.parse.urlsplit(spec.url.replace("{port}", "0")).hostname or "127.0.0.1"
        port = free_port(host) if needs_port else (urllib.parse.urlsplit(spec.url).port or 80)

        def fill(s: str) -> str:
            return s.replace("{port}", str(port)).replace("{checkpoint}", str(checkpoint_dir or ""))

        self.spec = spec
        self.endpoint_url = fill(spec.url).rstrip("/")
        self.model = fill(spec.model)
        self.launched = bool(spec.launch)
        super().__init__(
            [fill(a) for a in spec.launch] or ["<external endpoint>"],
            host=host,
            port=port,
            log_path=log_path,
        )
        self._api_key = spec.api_key()

    @property
    def url(self) -> str:
        return self.endpoint_url

    @property
    def api_key(self) -> str | None:
        return self._api_key

    def start(self) -> None:
        if self.launched:
            super().start()
        else:
            self.spawn_ns = time.time_ns()

    poll_s = 0.5

    def probe(self) -> tuple[dict | None, object]:
        """Ready once /v1/models answers and names the model (a different model is an error)."""
        status, ids = served_models(self.url, self._api_key, timeout=2.0)
        if status != 200:
            return None, (status, ids)
        if self.model not in ids:
            raise EndpointError(
                f"endpoint {self.url} is reachable but /v1/models does not name "
                f"{self.model!r} (it serves {ids})"
            )
        return {"models": ids, "serves_model": True, "launched": self.launched}, (status, ids)

    def not_ready(self, timeout_s: float, last) -> Exception:
        return EndpointError(
            f"endpoint {self.url} not reachable after {timeout_s:.0f}s (last: {last})"
            + (f"; last lines of {self.log_path}:\n{self.log_tail()}" if self.launched else "")
        )


def pinned_checkpoint(pin_path: str | None, checkpoint: str | None = None) -> str | None:
    """The checkpoint dir the endpoint claims to serve: --checkpoint, or the pin's dir (every pinned
    file re-hashed first)."""
    if checkpoint or not pin_path:
        return checkpoint
    from qualflow.artifacts.pin import read_pin, verify_pin

    return str(verify_pin(read_pin(pin_path)))


def main_endpoint_correctness(a) -> int:
    """`qualflow endpoint-correctness`: endpoint correctness against the pinned checkpoint,
    written to --out in the correctness table's columns. A launched endpoint is started, checked
    and stopped here, with the same lifetime rules as in the session."""
    import pandas as pd

    from qualflow.correctness.criteria import COLUMNS
    from qualflow.correctness.endpoint import run_endpoint_correctness
    from qualflow.correctness.table import write_correctness
    from qualflow.invocation import current_command

    spec = EndpointSpec.from_json(a.endpoint)
    checkpoint = pinned_checkpoint(a.pin, a.checkpoint)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def failure(msg: str) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "case_id": "run/endpoint",
                    "prompt_id": None,
                    "criterion": "run",
                    "measured": float("nan"),
                    "threshold": float("nan"),
                    "passed": False,
                    "detail": msg,
                    "thresholds_version": None,
                    "effective_precision": "endpoint",
                    "device": "endpoint",
                }
            ]
        )[COLUMNS]

    if not checkpoint:
        df = failure(
            "no checkpoint pinned: "
            "endpoint correctness needs the weights the endpoint claims to serve"
        )
    else:
        srv = EndpointProcess(
            spec, log_path=out.with_suffix(".endpoint.log"), checkpoint_dir=checkpoint
        )
        try:
            srv.start()
            srv.wait_healthy(a.startup_timeout)
            df = run_endpoint_correctness(srv.url, srv.model, checkpoint, api_key=srv.api_key)
        except Exception as e:  # noqa: BLE001 - with --record-failures every failure is evidence
            if not a.record_failures:
                raise
            df = failure(f"endpoint correctness did not run: {type(e).__name__}: {e}"[:4000])
        finally:
            srv.stop()
    write_correctness(df, out, current_command())
    for r in df.itertuples():
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.case_id:40s} {r.detail}")
    failed = int((~df["passed"].astype(bool)).sum())
    print(
        f"{len(df) - failed}/{len(df)} endpoint correctness cases passed "
        f"({df.thresholds_version.iloc[0]})"
    )
    return 0 if a.record_failures or not failed else 1
