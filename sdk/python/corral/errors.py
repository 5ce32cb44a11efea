"""Exceptions raised by the corral client, one class per API error code."""

from __future__ import annotations

import json


class CorralError(Exception):
    """An error answered by the daemon (or a failure to reach it).

    ``status`` is the HTTP status (0 when no answer arrived), ``code`` the
    stable API error code (such as ``"not_found"``), ``message`` what went
    wrong, ``hint`` what to do about it, ``field`` the offending field.
    """

    def __init__(self, status: int, code: str, message: str, hint: str = "", field: str = ""):
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.field = field
        text = f"{code}: {message}" if code else message
        if field:
            text += f" (field {field})"
        if hint:
            text += f" [hint: {hint}]"
        super().__init__(text)


class BadRequest(CorralError):
    """The request was malformed or a value is invalid (400, 405, 413, 415)."""


class Unauthorized(CorralError):
    """Missing or wrong API key (401)."""


class NotFound(CorralError):
    """No such sandbox, process, file or route (404)."""


class RequestTimeout(CorralError):
    """The request (or a wait) did not finish in time (408)."""


class Conflict(CorralError):
    """The resource is not in a state that allows this (409)."""


class SandboxExpired(CorralError):
    """The sandbox reached its lifetime and is gone (410)."""


class OverCapacity(CorralError):
    """The daemon has no room for another sandbox now (429)."""


class SetupFailed(CorralError):
    """A sandbox stage failed while creating it (500)."""


class Forbidden(CorralError):
    """The daemon refuses this on purpose (403): e.g. corral's secret files."""


class InternalError(CorralError):
    """The daemon failed unexpectedly (500)."""


class Unavailable(CorralError):
    """The daemon is shutting down or overloaded (503)."""


class InsufficientStorage(CorralError):
    """The sandbox's disk limit is full (507)."""


class ConnectionFailed(CorralError):
    """The daemon could not be reached or the connection broke."""


_BY_CODE = {
    "bad_json": BadRequest,
    "unknown_field": BadRequest,
    "wrong_type": BadRequest,
    "invalid_value": BadRequest,
    "path_escape": BadRequest,
    "method_not_allowed": BadRequest,
    "body_too_large": BadRequest,
    "unsupported_media_type": BadRequest,
    "bad_request_body": BadRequest,
    "unauthorized": Unauthorized,
    "secret_file": Forbidden,
    "not_found": NotFound,
    "request_timeout": RequestTimeout,
    "conflict": Conflict,
    "idempotency_mismatch": Conflict,
    "sandbox_expired": SandboxExpired,
    "over_capacity": OverCapacity,
    "overloaded": Unavailable,
    "setup_failed": SetupFailed,
    "internal": InternalError,
    "unavailable": Unavailable,
    "insufficient_storage": InsufficientStorage,
}

_BY_STATUS = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: BadRequest,
    408: RequestTimeout, 409: Conflict, 410: SandboxExpired, 413: BadRequest,
    415: BadRequest, 429: OverCapacity, 500: InternalError, 503: Unavailable,
    507: InsufficientStorage,
}


def error_from_body(status: int, error: dict) -> CorralError:
    """Builds the exception for an ``{"code", "message", ...}`` error object."""
    code = str(error.get("code") or "")
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or CorralError
    return cls(status, code, str(error.get("message") or ""), str(error.get("hint") or ""),
               str(error.get("field") or ""))


def error_from_response(status: int, body: bytes) -> CorralError:
    """Builds the exception for an error response's status and raw body."""
    try:
        doc = json.loads(body.decode("utf-8"))
        error = doc["error"] if isinstance(doc, dict) else None
        if not isinstance(error, dict):
            raise ValueError("no error object")
    except (ValueError, KeyError, UnicodeDecodeError):
        text = body[:500].decode("utf-8", "replace").strip()
        error = {"code": "", "message": text or f"HTTP {status}"}
    return error_from_body(status, error)
