"""JSON schemas of the server's bodies that have no pydantic model (health, model list, timing
pages, stored-object pages and conversations, OpenAI's error, the function tool), for the OpenAPI
document (http.openapi)."""

from __future__ import annotations

REF = "#/components/schemas/{model}"
FUNCTION_TOOL = {
    "type": "object",
    "description": "A function the model may call (the only tool type this server serves).",
    "properties": {
        "type": {"const": "function"},
        "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        "description": {"type": ["string", "null"]},
        "parameters": {"type": ["object", "null"], "description": "A JSON object schema."},
        "strict": {"type": ["boolean", "null"]},
    },
    "required": ["type", "name"],
    "additionalProperties": False,
}
ERROR = {
    "type": "object",
    "description": "OpenAI's error shape.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
            "required": ["message", "type", "param", "code"],
        }
    },
    "required": ["error"],
}
HEALTH = {
    "type": "object",
    "description": "The server's state; 503 while the model loads or after the engine failed.",
    "properties": {
        "status": {"enum": ["ok", "loading", "failed"]},
        "started_ns": {"type": "integer"},
        "error": {"type": ["string", "null"]},
        "active_requests": {"type": "integer"},
        "admission_limit": {"type": "integer"},
        "api_server_count": {"type": "integer"},
        "model": {"type": "string"},
        "context_limit": {"type": ["integer", "null"]},
        "capabilities": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["status", "started_ns", "active_requests", "admission_limit"],
}
MODELS = {
    "type": "object",
    "properties": {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "object": {"const": "model"},
                    "created": {"type": "integer"},
                    "owned_by": {"type": "string"},
                },
                "required": ["id", "object", "created", "owned_by"],
            },
        },
    },
    "required": ["object", "data"],
}
TIMINGS = {
    "type": "object",
    "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": {"type": "object"}},
        "has_more": {"type": "boolean"},
        "next_after": {"type": "integer"},
    },
    "required": ["object", "data", "has_more", "next_after"],
}
PAGE = {
    "type": "object",
    "description": "A page of items, oldest or newest first (`order`).",
    "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": {"type": "object"}},
        "first_id": {"type": ["string", "null"]},
        "last_id": {"type": ["string", "null"]},
        "has_more": {"type": "boolean"},
    },
    "required": ["object", "data", "first_id", "last_id", "has_more"],
}
CONVERSATION = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "conversation"},
        "created_at": {"type": "integer"},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["id", "object", "created_at", "metadata"],
}
METADATA = {
    "type": ["object", "null"],
    "maxProperties": 16,
    "propertyNames": {"maxLength": 64},
    "additionalProperties": {"type": "string", "maxLength": 512},
}
ITEM = {
    "type": "object",
    "description": "An input item (a message, a function call or its output), as in `input`.",
}
METADATA_BODY = {"type": "object", "properties": {"metadata": METADATA}}
CONVERSATION_BODY = {
    "type": "object",
    "properties": {
        "metadata": METADATA,
        "items": {"type": ["array", "null"], "maxItems": 20, "items": ITEM},
    },
}
ITEMS_BODY = {
    "type": "object",
    "properties": {"items": {"type": "array", "minItems": 1, "maxItems": 20, "items": ITEM}},
    "required": ["items"],
}


def deleted(kind: str) -> dict:
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": f"{kind}.deleted"},
            "deleted": {"const": True},
        },
        "required": ["id", "object", "deleted"],
    }
