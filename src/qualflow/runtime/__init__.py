"""The runtime: engine (continuous batching, KV cache, sampling) behind the public Task API.

The package root is the Task API: the server, correctness and benchmarks import from here only.
Its names resolve on first use (PEP 562), so `qualflow.runtime.config` and `qualflow.runtime.api`
import without torch: the CLI builds its flags from EngineConfig on every call.

Inside: `api/` (the public types), `config` (EngineConfig), `task` (the Task), `frontend/` (the
caller's side of a request), `engine/` (the engine of one process), `kernels/` (attention and its
Triton kernels), `process/` (the engine in a child process; `EngineHost`, the engine process several
API processes share). The benchmarks over it are qualflow.bench."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .api.capabilities import (
        REASONING,
        SCORING,
        STREAMING,
        STRUCTURED_OUTPUT,
        TEXT_GENERATION,
        TOOLS,
    )
    from .api.errors import (
        CapabilityMissing,
        EngineFailed,
        InvalidRequest,
        PromptTooLong,
        TaskError,
    )
    from .api.events import FinalEvent, TaskTiming, TokenEvent
    from .api.grammar import GrammarSpec
    from .api.request import GenerationRequest, SamplingParams, Thinking
    from .api.tool_calls import (
        CallArguments,
        CallDone,
        CallInvalid,
        CallName,
        CallStarted,
        ToolText,
    )
    from .config import EngineConfig
    from .process.core_hub import EngineHost
    from .task import Task, load_task

_WHERE = {  # public name -> the module that defines it
    "REASONING": "api.capabilities",
    "SCORING": "api.capabilities",
    "STREAMING": "api.capabilities",
    "TEXT_GENERATION": "api.capabilities",
    "STRUCTURED_OUTPUT": "api.capabilities",
    "TOOLS": "api.capabilities",
    "GrammarSpec": "api.grammar",
    "ToolText": "api.tool_calls",
    "CallStarted": "api.tool_calls",
    "CallName": "api.tool_calls",
    "CallArguments": "api.tool_calls",
    "CallDone": "api.tool_calls",
    "CallInvalid": "api.tool_calls",
    "CapabilityMissing": "api.errors",
    "EngineFailed": "api.errors",
    "InvalidRequest": "api.errors",
    "PromptTooLong": "api.errors",
    "TaskError": "api.errors",
    "FinalEvent": "api.events",
    "TaskTiming": "api.events",
    "TokenEvent": "api.events",
    "GenerationRequest": "api.request",
    "SamplingParams": "api.request",
    "Thinking": "api.request",
    "EngineConfig": "config",
    "EngineHost": "process.core_hub",
    "Task": "task",
    "load_task": "task",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
