"""The requests the protocol checks expect a 400 for (session.conformance): each with the param
its error must name. Those of a capability run only where the stack does not serve it."""

from __future__ import annotations

# (name, request overrides, expected error param)
REJECTIONS = (
    ("reject_temperature_out_of_range", {"temperature": 5.0}, "temperature"),
    ("reject_max_output_tokens_zero", {"max_output_tokens": 0}, "max_output_tokens"),
    ("reject_unknown_parameter", {"extra_body": {"frobnicate": True}}, "frobnicate"),
    (
        "reject_previous_response_id",
        {"previous_response_id": "resp_0123456789abcdef"},
        "previous_response_id",
    ),
)
# (name, request overrides, expected error param, capability): a refusal the stack owes only where
# it does not serve that capability (our server: /health's `capabilities`; an endpoint: its
# config)
CAPABILITY_REJECTIONS = (
    (
        "reject_function_tools",
        {
            "tools": [
                {
                    "type": "function",
                    "name": "f",
                    "parameters": {"type": "object", "properties": {}},
                }
            ]
        },
        "tools",
        "tools",
    ),
)
