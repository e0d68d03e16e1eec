"""Function tools and structured output in the handler, over the Task API: the request's tools
checked against the Task's capabilities (a family without a tool format keeps a 400 with its
reason), the prompt rendered with them, the grammar the engine constrains the output with, and the
non-streamed response's output items parsed from the answer (tool_output.py; the stream:
tool_stream.py).

Tool choice -> grammar: `auto` (and `allowed_tools` auto): free text until the model opens a call,
then the call constrained to an allowed tool's schema; `required`, a named function and
`allowed_tools` required: only calls; `none`: the tools are not rendered and nothing is parsed.
`parallel_tool_calls: false` allows one call. `text.format` json_schema / json_object: the
output is constrained to the schema."""

from __future__ import annotations

from qualflow.runtime import STRUCTURED_OUTPUT, TOOLS, FinalEvent, GrammarSpec

from .protocol.requests import CreateResponse
from .protocol.responses import Response
from .protocol.tools import ToolRequest, tool_request
from .supported import unsupported
from .tool_output import ToolOutput


def request_tools(req: CreateResponse, task) -> ToolRequest:
    """The request's validated tools and format; a 400 when the Task cannot serve them."""
    tr = tool_request(req)
    if tr.calls and TOOLS not in task.capabilities:
        why = getattr(task, "tools_unavailable", None) or "the Task has no 'tools' capability"
        raise unsupported("tools", f"asks for function tools, which this model cannot serve: {why}")
    if tr.format is not None and STRUCTURED_OUTPUT not in task.capabilities:
        raise unsupported(
            "text.format",
            f"asks for {tr.format['type']} output, which this engine cannot constrain",
            "unsupported_value",
        )
    return tr


def render(task, req: CreateResponse, messages: list[dict], thinking, tr: ToolRequest) -> list:
    """The prompt ids: with the tools when the model may call them."""
    extra = {}
    if thinking:
        extra["thinking"] = True
    if tr.calls:
        extra["tools"] = list(tr.tools)
    return task.render_prompt(req.instructions, messages, **extra)


def grammar_for(tr: ToolRequest) -> GrammarSpec | None:
    if tr.format is not None:
        return GrammarSpec(tr.format["type"], schema=tr.format.get("schema"))
    if not tr.calls:
        return None
    kind = "calls" if tr.mode == "required" else "auto"
    return GrammarSpec(kind, tuple(tr.allowed), tr.parallel)


def with_calls(resp: Response, final: FinalEvent, task, p) -> Response:
    """The non-streamed response of a request whose answer may hold calls: its message item
    replaced by the items parsed from the answer (after the reasoning item, if any)."""
    keep = [i for i in resp.output if i.type == "reasoning"]
    if p.reasoning_id is not None and len(keep) == len(resp.output):
        return resp  # cut inside the think block: no answer
    out = ToolOutput(task.tool_parser(), len(keep), p.message_id)
    out.push(final.text)
    out.finish("completed" if resp.status == "completed" else "incomplete")
    p.record.tool_calls = out.calls
    resp.output = keep + out.items
    return resp


def echo(resp: Response, req: CreateResponse) -> Response:
    """The request's tools and text format echoed in a response (snapshot). A function tool's
    `strict` is echoed as in effect: true unless the request set it (its calls are constrained to
    its schema either way; the Open Responses type requires the field)."""
    resp.tools = [_strict(t) for t in req.tools or []]
    if req.tool_choice is not None:
        resp.tool_choice = req.tool_choice
    if req.text is not None and req.text.format is not None:
        resp.text = {**resp.text, "format": req.text.format}
    return resp


def _strict(tool):
    if isinstance(tool, dict) and tool.get("type") == "function" and tool.get("strict") is None:
        return {**tool, "strict": True}
    return tool
