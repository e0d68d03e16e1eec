"""The runtime: engine (continuous batching, KV cache, sampling) behind the public Task API."""
from .api import SCORING, Task, load_task
from .task import (STREAMING, TEXT_GENERATION, CapabilityMissing, FinalEvent, GenerationRequest,
                   InvalidRequest, PromptTooLong, SamplingParams, TaskError, TaskTiming, TokenEvent)

__all__ = ["SCORING", "STREAMING", "TEXT_GENERATION", "CapabilityMissing", "FinalEvent", "GenerationRequest",
           "InvalidRequest", "PromptTooLong", "SamplingParams", "Task", "TaskError", "TaskTiming", "TokenEvent",
           "load_task"]
