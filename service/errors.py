"""Every failure a client can see: JSON ``{"error", "message", "request_id"}`` with its status."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from service.batcher import BatcherClosed, BatchFailed, QueueFull, RequestTimeout, TooManySentences
from service.keys import KeyRefused
from service.loader import LoadInProgress
from service.metrics import Metrics
from service.schemas import ErrorResponse

log = logging.getLogger(__name__)

ERROR_CODES = (
    "validation",
    "too_large",
    "unauthorized",
    "forbidden",
    "rate_limited",
    "quota_exceeded",
    "not_ready",
    "unknown_model",
    "unsupported_language_pair",
    "unsupported_format",
    "overloaded",
    "timeout",
    "engine_error",
    "internal",
)
"""The usual ``error`` codes; the errors counter exports them at zero from the start."""

_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}


class ApiError(Exception):
    """An error with its status, stable code and a message that says what to do."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))


def error_response(
    request_id: str,
    status: int,
    code: str,
    message: str,
    *,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = ErrorResponse(error=code, message=message, request_id=request_id, details=details)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


def key_refusal(err: KeyRefused) -> ApiError:
    """This API's answer to a request its key does not allow."""
    if err.reason == "missing":
        return ApiError(401, "unauthorized", "missing API key: send it in the X-API-Key header")
    if err.reason == "wrong":
        return ApiError(403, "forbidden", "wrong API key (X-API-Key)")
    code = "rate_limited" if err.reason == "rate" else "quota_exceeded"
    return ApiError(429, code, err.message, {"Retry-After": str(err.retry_after or 1)})


CLIENT_ERRORS = (
    ApiError,
    KeyRefused,
    QueueFull,
    TooManySentences,
    RequestTimeout,
    BatchFailed,
    BatcherClosed,
    LoadInProgress,
)
"""What a request can fail with that the client is told about (``as_api_error``); an API answering in another
service's shape catches these."""


def as_api_error(err: Exception) -> ApiError:
    """The client-facing form of the exceptions the service raises."""
    if isinstance(err, ApiError):
        return err
    if isinstance(err, KeyRefused):
        return key_refusal(err)
    if isinstance(err, QueueFull):
        return ApiError(503, "overloaded", str(err), {"Retry-After": str(err.retry_after)})
    if isinstance(err, TooManySentences):
        return ApiError(413, "too_large", str(err))
    if isinstance(err, RequestTimeout):
        return ApiError(504, "timeout", str(err))
    if isinstance(err, BatchFailed):
        return ApiError(500, "engine_error", f"{err}; the request may be retried")
    if isinstance(err, BatcherClosed):
        return ApiError(
            503,
            "shutting_down",
            "the server is shutting down; retry on another replica",
            {"Retry-After": "1"},
        )
    if isinstance(err, LoadInProgress):
        return ApiError(409, "reload_in_progress", str(err))
    raise TypeError(f"no client-facing form for {type(err).__name__}")


def _validation_message(errors: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    parts, details = [], []
    for error in errors:
        if error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "")
            message = f"the body is not valid JSON ({reason}); send a JSON object"
            return message, [{"loc": ["body"], "msg": message, "type": "json_invalid"}]
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        where = ".".join(loc) or "body"
        message = str(error.get("msg", "invalid"))
        value = error.get("input")
        if isinstance(value, int | float | bool) or (isinstance(value, str) and len(value) <= 40 and where != "text"):
            message += f" (got {value!r})"
        parts.append(f"{where}: {message}")
        details.append({"loc": loc, "msg": message, "type": error.get("type", "")})
    return "invalid request: " + "; ".join(parts[:5]) + ("; ..." if len(parts) > 5 else ""), details


def install_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    """Map every known exception to its JSON error; the request middleware catches the rest."""

    def count(request: Request, code: str) -> None:
        metrics.errors.labels(code).inc()
        fields = getattr(request.state, "log_fields", None)
        if isinstance(fields, dict):
            fields["error"] = code  # the access log line says why, too

    def respond(request: Request, error: ApiError) -> JSONResponse:
        count(request, error.code)
        if error.status >= 500:
            log.warning("request %s failed: %s", request_id(request), error.message)
        return error_response(request_id(request), error.status, error.code, error.message, headers=error.headers)

    async def on_known(request: Request, err: Exception) -> JSONResponse:
        return respond(request, as_api_error(err))

    async def on_validation(request: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, RequestValidationError)
        message, details = _validation_message(err.errors())
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if (
            request.method == "POST"
            and kind
            and kind != "application/json"
            and any(tuple(e.get("loc", ()))[:1] == ("body",) for e in err.errors())
        ):
            # a form or text body where JSON is expected: say that, not "Input should be a valid dictionary"
            message = (
                f"the body is {kind}; this endpoint takes JSON: send it with Content-Type: application/json "
                "(LibreTranslate-style form bodies are taken under /libretranslate/)"
            )
        count(request, "validation")
        return error_response(request_id(request), 422, "validation", message, details=details)

    async def on_http(request: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, HTTPException)
        if err.status_code == 400 and err.__cause__ is not None:
            # FastAPI could not parse the body (not UTF-8, nested too deeply): malformed JSON, like
            # any other, so the same 422 with a message that says what is wrong
            cause = err.__cause__
            message = f"the body is not valid JSON ({type(cause).__name__}: {cause}); send a UTF-8 JSON object"
            count(request, "validation")
            details = [{"loc": ["body"], "msg": message, "type": "json_invalid"}]
            return error_response(request_id(request), 422, "validation", message, details=details)
        code = _HTTP_CODES.get(err.status_code, f"http_{err.status_code}")
        count(request, code)
        headers = dict(err.headers) if err.headers else None
        message = str(err.detail)
        if err.status_code in (404, 405):
            message = f"{message}: {request.method} {request.url.path}; the API is listed at /docs"
            path = request.url.path
            if path.startswith(("/v2/", "/v3/")) and not path.startswith("/v3/projects/"):  # DeepL's, at the root
                message += "; DeepL's API is under /deepl/v2/: a DeepL client's server_url ends in /deepl/"
        return error_response(request_id(request), err.status_code, code, message, headers=headers)

    for kind in CLIENT_ERRORS:
        if kind is not KeyRefused:  # the key dependency turns it into an ApiError (key_refusal)
            app.add_exception_handler(kind, on_known)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
