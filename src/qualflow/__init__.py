"""qualflow: qualify a native PyTorch LLM runtime behind the OpenAI Responses API."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("qualflow")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"
