"""What an AIPerf run needs besides its workload point: the server it talks to (`ClientOptions`) and
how AIPerf itself runs (`AiperfOptions`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClientOptions:
    """The server under test as AIPerf reaches it: its URL, the served model name, the tokenizer
    AIPerf counts tokens with (a local dir or hub id), the API key (never shown in a recorded
    command) and AIPerf's export level (`raw`: every SSE event, so each stream's terminal event
    can be checked without server records)."""

    url: str
    model_name: str
    tokenizer: str
    api_key: str | None = field(default=None, repr=False)
    export_level: str = "records"


@dataclass(frozen=True)
class AiperfOptions:
    """AIPerf's own processes and limits: its worker and record-processor counts, the wall-clock
    limit of one run, how often a progress line goes to the log, and the executable."""

    workers_max: int = 1
    record_processors: int = 1
    timeout_s: float = 3600.0
    progress_every_s: float = 5.0
    aiperf_bin: str = "aiperf"
