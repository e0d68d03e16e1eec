"""Errors the Task raises. Every one is a TaskError; a request error names the offending field."""

from __future__ import annotations


class TaskError(Exception):
    """Base of every error the Task raises."""


class CapabilityMissing(TaskError):
    def __init__(self, capability: str, have: frozenset[str]):
        super().__init__(f"task lacks capability {capability!r}; it has {sorted(have)}")
        self.capability = capability


class InvalidRequest(TaskError):
    """A request that cannot be queued. `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.param = param
        self.code = code


class PromptTooLong(InvalidRequest):
    def __init__(self, n_prompt: int, max_new: int, limit: int):
        super().__init__(
            f"prompt of {n_prompt} tokens plus max_new_tokens={max_new} exceeds the context "
            f"limit of {limit}",
            param="input",
            code="context_length_exceeded",
        )
        self.n_prompt, self.limit = n_prompt, limit


class EngineFailed(TaskError):
    """The engine cannot serve any more (its thread died); the message says why."""
