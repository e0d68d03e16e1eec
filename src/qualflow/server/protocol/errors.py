"""Errors in OpenAI's shape: `ApiError` (status, message, type, param, code) and its 400
(`bad_request`); `from_validation_error` turns pydantic's first validation error of a request body
into the 400 OpenAI answers for it, with a string code and the offending param."""

from __future__ import annotations

from pydantic import ValidationError


class ApiError(Exception):
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code = param, code
        # seconds; set when a retry can succeed (429, 503 while loading)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        if self.retry_after is not None:
            return {"retry-after": str(int(self.retry_after))}
        return {"x-should-retry": "false"} if self.status >= 500 else {}

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad_request(message: str, param: str | None, code: str) -> ApiError:
    return ApiError(400, message, "invalid_request_error", param, code)


_UNION_TAGS = ("str", "list[any]", "dict[str,any]", "function-after[...]")


def _param(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_TAGS or "[" in str(part):
            continue  # union member tags pydantic puts into loc
        else:
            out += ("." if out else "") + str(part)
    return out


_BOUNDS = {
    "greater_than_equal": ">=",
    "greater_than": ">",
    "less_than_equal": "<=",
    "less_than": "<",
}


def from_validation_error(e: ValidationError) -> ApiError:
    """The 400 for a request body's first validation error."""
    err = e.errors(include_url=False)[0]
    param, kind, ctx = _param(err["loc"]), err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return bad_request(f"Unknown parameter: '{param}'.", param, "unknown_parameter")
    if kind == "missing":
        return bad_request(
            f"Missing required parameter: '{param}'.", param, "missing_required_parameter"
        )
    if kind in _BOUNDS:
        op, bound = _BOUNDS[kind], next(iter(ctx.values()), None)
        number = "decimal" if isinstance(bound, float) else "integer"
        below = kind.startswith("greater")
        return bad_request(
            f"Invalid '{param}': {number} {'below minimum' if below else 'above maximum'} value. "
            f"Expected a value {op} {bound}, but got {err.get('input')!r} instead.",
            param,
            f"{number}_{'below_min' if below else 'above_max'}_value",
        )
    if kind == "string_too_long":
        limit = ctx.get("max_length")
        return bad_request(
            f"Invalid '{param}': string too long. Expected a string with maximum "
            f"length {limit}, but got a string with length "
            f"{len(err.get('input') or '')} instead.",
            param,
            "string_above_max_length",
        )
    if kind == "literal_error":
        return bad_request(f"Invalid value for '{param}': {err['msg']}.", param, "invalid_value")
    return bad_request(f"Invalid type for '{param}': {err['msg']}.", param, "invalid_type")
