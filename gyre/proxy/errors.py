"""Proxy errors and their wire shapes: each API's own error body, so an unmodified client (and its retry
logic) understands them.

One exception type carries a semantic ``kind``; the endpoint family (OpenAI or Anthropic) decides the body
and, for overload, the status (OpenAI 429, Anthropic 529 ``overloaded_error``).
"""

from __future__ import annotations

from typing import Any, Literal

ErrorKind = Literal[
    "invalid_request", "authentication", "not_found", "too_large", "overloaded", "rate_limited", "unavailable",
    "internal",
]

_STATUS: dict[str, int] = {
    "invalid_request": 400,
    "authentication": 401,
    "not_found": 404,
    "too_large": 413,
    "overloaded": 429,
    "rate_limited": 429,  # a per-execution budget is spent: retrying does not help
    "unavailable": 503,
    "internal": 500,
}
_OPENAI_TYPE: dict[str, tuple[str, str | None]] = {
    "invalid_request": ("invalid_request_error", None),
    "authentication": ("invalid_request_error", "invalid_api_key"),
    "not_found": ("invalid_request_error", "not_found"),
    "too_large": ("invalid_request_error", "request_too_large"),
    "overloaded": ("rate_limit_exceeded", "rate_limit_exceeded"),
    "rate_limited": ("rate_limit_exceeded", "budget_exceeded"),
    "unavailable": ("server_error", "service_unavailable"),
    "internal": ("server_error", None),
}
_ANTHROPIC_TYPE: dict[str, str] = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "not_found": "not_found_error",
    "too_large": "request_too_large",
    "overloaded": "overloaded_error",
    "rate_limited": "rate_limit_error",
    "unavailable": "api_error",
    "internal": "api_error",
}


class ProxyError(Exception):
    """An error returned to the client. ``param`` names the offending field where there is one."""

    def __init__(
        self, kind: ErrorKind, message: str, *, param: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param
        self.retry_after_s = retry_after_s

    def status(self, api: str) -> int:
        if self.kind == "overloaded" and api == "anthropic":
            return 529
        return _STATUS[self.kind]

    def headers(self) -> dict[str, str]:
        if self.retry_after_s is None:
            return {}
        return {"retry-after": str(max(1, round(self.retry_after_s)))}

    def body(self, api: str) -> dict[str, Any]:
        if api == "anthropic":
            return {"type": "error", "error": {"type": _ANTHROPIC_TYPE[self.kind], "message": self.message}}
        kind, code = _OPENAI_TYPE[self.kind]
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": code}}


def bad_request(message: str, param: str | None = None) -> ProxyError:
    return ProxyError("invalid_request", message, param=param)
