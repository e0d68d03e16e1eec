"""Writes agent-v1.json: recorded agent sessions as AIPerf `inputs_json` (`{"data": [{"session_id",
"payloads": [...]}]}`), one Responses request body per turn, sent verbatim in order per session.

Source: bfcl-eval's multi-turn base category (BFCL_v4_multi_turn_base: user turns, the expected
calls of each turn, and the simulated Python tools of its classes: file system, trading, travel,
...; Apache-2.0). For each chosen session the payload of turn t holds:
- `tools`: the session's functions (those its expected calls use), as Responses function tools;
- `input`: the history so far: every earlier turn's user message, its expected `function_call`
  items and the `function_call_output` items that executing those calls on bfcl-eval's simulated
  tools returned (offline, deterministic), then turn t's user message.
No `model`, `stream` or output limit: the workflow sets those per point when it runs the file, so
the file itself names no model. Sessions are picked with `--seed` and the output is deterministic:
rerun it and the file (and its sha256) is unchanged.

bfcl-eval is needed only here, never by the workflow. Its dependencies are heavy and pin numpy,
and the simulated tools need none of them, so install the wheel alone:

    pip install --no-deps --target /tmp/bfcl bfcl-eval==2026.3.23
    PYTHONPATH=/tmp/bfcl python workloads/agent/make_agent_v1.py > workloads/agent/agent-v1.json
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import random
import sys
from importlib import import_module, resources

BFCL_VERSION = "2026.3.23"
CATEGORY = "BFCL_v4_multi_turn_base"
# BFCL's parameter types that JSON Schema spells differently ("any": no type constraint)
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def _bfcl():
    try:
        utils = import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
        backends = import_module("bfcl_eval.constants.executable_backend_config")
    except ImportError as e:
        sys.exit(
            f"make_agent_v1: bfcl-eval is not importable ({e}). Install it for generating only: "
            f"pip install --no-deps --target /tmp/bfcl bfcl-eval=={BFCL_VERSION}; then run with "
            "PYTHONPATH=/tmp/bfcl"
        )
    return utils, backends


def _lines(path: str) -> list[dict]:
    text = resources.files("bfcl_eval").joinpath("data", path).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def json_schema(node):
    """A BFCL parameter schema as JSON Schema: its types renamed, unknown-type nodes left open."""
    if isinstance(node, list):
        return [json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "type" and isinstance(v, str) and v in _TYPES:
            if _TYPES[v] is not None:
                out[k] = _TYPES[v]
        elif k == "properties" and isinstance(v, dict):
            out[k] = {name: json_schema(p) for name, p in v.items()}
        else:
            out[k] = json_schema(v)
    return out


def function_tool(doc: dict) -> dict:
    return {
        "type": "function",
        "name": doc["name"],
        "description": doc.get("description", ""),
        "parameters": json_schema(doc["parameters"]),
        "strict": False,
    }


def call_arguments(call: str, signature: inspect.Signature) -> tuple[str, dict]:
    """`f(1, b='x')` -> ("f", {"a": 1, "b": "x"}): positional arguments named from the simulated
    tool's signature."""
    node = ast.parse(call, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {call!r}")
    names = [p for p in signature.parameters if p != "self"]
    args = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    args.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords})
    return node.func.id, args


def session_tools(entry: dict, calls: list[list[str]], docs: dict) -> list[dict]:
    """The session's functions: those its path and its expected calls name, in that order, from
    the docs of its classes (a path entry with no doc is left out)."""
    names = [p.split(".", 1)[1] for p in entry["path"]]
    names += [c.split("(", 1)[0].strip() for turn in calls for c in turn]
    by_name = {n: d for c in entry["involved_classes"] for n, d in docs[c].items()}
    return [function_tool(by_name[n]) for n in dict.fromkeys(names) if n in by_name]


def session_payloads(entry: dict, calls: list[list[str]], utils, backends, docs: dict) -> list:
    """The payloads of one session: turn t's history is every earlier turn's user message, calls
    and tool outputs, then turn t's user message."""
    classes = {
        c: getattr(import_module(backends.CLASS_FILE_PATH_MAPPING[c]), c)
        for c in entry["involved_classes"]
    }
    tools = session_tools(entry, calls, docs)
    history, payloads = [], []
    for t, (messages, turn_calls) in enumerate(zip(entry["question"], calls, strict=True)):
        history += [
            {"type": "message", "role": m["role"], "content": m["content"]} for m in messages
        ]
        payloads.append({"input": list(history), "tools": tools})
        outputs, _ = utils.execute_multi_turn_func_call(
            turn_calls, entry["initial_config"], entry["involved_classes"], "qualflow", entry["id"]
        )
        for k, (call, output) in enumerate(zip(turn_calls, outputs, strict=True)):
            name = call.split("(", 1)[0].strip()
            owner = next(c for c in classes.values() if hasattr(c, name))
            name, args = call_arguments(call, inspect.signature(getattr(owner, name)))
            call_id = f"call_{entry['id'].rsplit('_', 1)[-1]}_{t}_{k}"
            history.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": name,
                    "arguments": json.dumps(args, sort_keys=True),
                }
            )
            history.append({"type": "function_call_output", "call_id": call_id, "output": output})
    return payloads


def build(n_sessions: int, seed: int) -> dict:
    utils, backends = _bfcl()
    entries = _lines(f"{CATEGORY}.json")
    answers = {a["id"]: a["ground_truth"] for a in _lines(f"possible_answer/{CATEGORY}.json")}
    docs = {
        c: {d["name"]: d for d in _lines(f"multi_turn_func_doc/{f}")}
        for c, f in backends.MULTI_TURN_FUNC_DOC_FILE_MAPPING.items()
    }
    chosen = sorted(random.Random(seed).sample(range(len(entries)), n_sessions))
    data = []
    for i in chosen:
        e = entries[i]
        payloads = session_payloads(e, answers[e["id"]], utils, backends, docs)
        data.append({"session_id": e["id"], "payloads": payloads})
    return {"data": data}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=20, help="sessions to pick")
    p.add_argument("--seed", type=int, default=42, help="picks the sessions")
    a = p.parse_args()
    json.dump(build(a.sessions, a.seed), sys.stdout, sort_keys=True, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
