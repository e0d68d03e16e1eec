"""What a request's output is constrained to (`GenerationRequest.grammar`): plain data, so that it
crosses the engine's process boundary inside the request (process/messages.py `Submit`), and the
engine compiles it once per distinct grammar (engine/grammar.py).

- `calls`: the output is a call of one of `tools` (several with `parallel`): a `required` or named
  tool choice;
- `auto`: free text until the model opens a call, then the call constrained as above;
- `json_schema` (`schema`) / `json_object`: structured output (`text.format`).
`tools` are Responses function tools ({"name", "parameters", ...}); only `name` and `parameters`
matter here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GrammarKind = Literal["calls", "auto", "json_schema", "json_object"]


@dataclass(frozen=True, eq=False)
class GrammarSpec:
    kind: GrammarKind
    tools: tuple[dict, ...] = ()
    parallel: bool = True
    schema: dict | None = None
