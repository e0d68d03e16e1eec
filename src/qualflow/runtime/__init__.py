"""The runtime: engine (continuous batching, KV cache, sampling) behind the public Task API.

The package root is the Task API: the server, correctness and benchmarks import from here only."""
from .capabilities import SCORING, STREAMING, TEXT_GENERATION
from .errors import CapabilityMissing, EngineFailed, InvalidRequest, PromptTooLong, TaskError
from .events import FinalEvent, TaskTiming, TokenEvent
from .request import GenerationRequest, SamplingParams
from .task import Task, load_task

__all__ = ["SCORING", "STREAMING", "TEXT_GENERATION", "CapabilityMissing", "FinalEvent", "GenerationRequest",
           "EngineFailed", "InvalidRequest", "PromptTooLong", "SamplingParams", "Task", "TaskError", "TaskTiming", "TokenEvent",
           "load_task"]
