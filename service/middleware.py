"""Outermost layer of every request: id, body limit, latency metric, access log, last-resort 500; and, inside it,
early refusal of decoding requests while the queue is full (:class:`Shed`).

Plain ASGI rather than BaseHTTPMiddleware: it sees the real status of every response, buffers the
body once,
and can answer 413 or 500 itself.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.batcher import QueueFull
from service.metrics import Metrics
from service.schemas import ErrorResponse

access_log = logging.getLogger("service.access")
log = logging.getLogger(__name__)

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_QUIET_ROUTES = {
    "/healthz",
    "/readyz",
    "/metrics",
}  # probes and scrapes: logged at debug level only
_BODY_METHODS = {"POST", "PUT", "PATCH"}
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}  # others: label "other"
DOCUMENT_PATHS = ("/translate/document", "/libretranslate/translate_file", "/deepl/v2/document")
"""Where a whole file is uploaded: the body may be MT_MAX_DOCUMENT_BYTES there (an office file carries pictures)."""


class RequestContext:
    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body_bytes: int, max_document_bytes: int):
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.max_document_bytes = max_document_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given_id = headers.get("x-request-id", "")
        request_id = given_id if _REQUEST_ID.match(given_id) else uuid.uuid4().hex[:16]
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["log_fields"] = {}
        started = time.perf_counter()
        status = 500
        response_started = False
        sent_bytes = 0
        received_bytes = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started, sent_bytes
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            elif message["type"] == "http.response.body":
                sent_bytes += len(message.get("body", b""))
            await send(message)

        self.metrics.requests_in_flight.inc()
        try:
            if scope["method"] in _BODY_METHODS:
                document = scope.get("path", "").rstrip("/").endswith(DOCUMENT_PATHS)
                limit = self.max_document_bytes if document else self.max_body_bytes
                body = await self._read_body(headers, receive, limit)
                if body is None:
                    status = 413
                    self.metrics.errors.labels("too_large").inc()
                    state["log_fields"]["error"] = "too_large"
                    message = self._too_large_message(
                        limit, "MT_MAX_DOCUMENT_BYTES" if document else "MT_MAX_BODY_BYTES"
                    )
                    await self._error(send_with_id, 413, "too_large", message, request_id)
                    return
                received_bytes = len(body)
                receive = _replay(body, receive)
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled error in request %s %s", request_id, scope.get("path"))
            self.metrics.errors.labels("internal").inc()
            state["log_fields"]["error"] = "internal"
            status = 500
            if not response_started:
                message = f"internal error; quote request id {request_id} when reporting it"
                await self._error(send_with_id, 500, "internal", message, request_id)
        finally:
            self.metrics.requests_in_flight.dec()
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", None) or ("static" if status < 400 else "unmatched")
            method = scope["method"] if scope["method"] in _METHODS else "other"
            self.metrics.request_seconds.labels(template, method, str(status)).observe(elapsed)
            fields: dict[str, Any] = {
                "request_id": request_id,
                "method": scope["method"],
                "path": scope.get("path"),
                "status": status,
                "latency_ms": round(elapsed * 1000, 2),
                "request_bytes": received_bytes,
                "response_bytes": sent_bytes,
                "client": scope["client"][0] if scope.get("client") else None,
                **state.get("log_fields", {}),
            }
            level = logging.DEBUG if template in _QUIET_ROUTES and status < 400 else logging.INFO
            access_log.log(level, "request", extra={"fields": fields})

    @staticmethod
    def _too_large_message(limit: int, variable: str) -> str:
        return f"request body is larger than {limit} bytes ({variable}); send less per request"

    async def _read_body(self, headers: dict[str, str], receive: Receive, limit: int) -> bytes | None:
        """The whole body, or None when it exceeds ``limit`` (early when Content-Length says so)."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away; let the app see an empty body
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    @staticmethod
    async def _error(send: Send, status: int, code: str, message: str, request_id: str) -> None:
        payload = ErrorResponse(error=code, message=message, request_id=request_id).model_dump(exclude_none=True)
        # after a 413 the unread rest of the body makes the connection unusable
        await _send_json(send, status, payload, [(b"connection", b"close")] if status == 413 else [])


AWS_DECODING = frozenset({b"TranslateText", b"TranslateDocument"})
"""Amazon's operations (``X-Amz-Target``) that queue sentences."""


class Shed:
    """While the queue is full, a decoding request (POST to one of ``paths``) is refused with 503 + Retry-After
    before the app parses and validates its body: under overload the refusals then cost the event loop a few
    dozen microseconds each instead of a request's parsing, validation and routing (docs/reliability.md).

    Inside :class:`RequestContext`, which has read the body (so the connection stays usable) and gives the answer
    its request id, latency metric and access log line; inside CORS, so a browser can read the refusal. ``paths``
    maps each path to its error shape: ``"api"`` (this API's ``ErrorResponse``), ``"libretranslate"``
    (``{"error": message}``), ``"deepl"`` (``{"message": message}``), ``"google"`` (``{"error": {"code", "message",
    "errors", "status"}}``), ``"microsoft"`` (``{"error": {"code": 503000, "message"}}``) or ``"aws"`` (``{"__type":
    "ServiceUnavailableException", "Message"}``, and only for the operations that decode, by ``X-Amz-Target``). With
    API keys set (``known``: is this one of them, service/keys.py), a request is refused early only when its key is
    right (``X-API-Key``, DeepL's ``Authorization: DeepL-Auth-Key``, Google's ``key=`` in the query,
    ``X-Goog-Api-Key`` or a bearer token, Microsoft's ``Ocp-Apim-Subscription-Key``, ``Subscription-Key=`` in the
    query or a bearer token, AWS's signature's access key id; LibreTranslate's travels in the body: those are left to
    the route); others go on to be told why."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        refusal: Callable[[], QueueFull | None],
        paths: Mapping[str | re.Pattern[str], str],
        metrics: Metrics,
        known: Callable[[str], bool] | None = None,
    ):
        self.app = app
        self.refusal = refusal
        self.paths = {path: shape for path, shape in paths.items() if isinstance(path, str)}
        self.patterns = [(path, shape) for path, shape in paths.items() if isinstance(path, re.Pattern)]
        self.metrics = metrics
        self.known = known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shape = self._shape(scope.get("path", "")) if scope["type"] == "http" and scope["method"] == "POST" else None
        refused = self.refusal() if shape else None  # the headers are read only while the queue is full
        if refused is not None and not self._may_refuse(scope, shape or ""):
            refused = None
        if refused is None:
            await self.app(scope, receive, send)
            return
        self.metrics.errors.labels("overloaded").inc()
        state = scope.setdefault("state", {})
        state.setdefault("log_fields", {}).update(error="overloaded", shed=True)
        message = str(refused)
        payload: dict[str, Any] = {"message" if shape == "deepl" else "error": message}
        if shape == "google":
            reason = {"message": message, "domain": "global", "reason": "backendError"}
            payload = {"error": {"code": 503, "message": message, "errors": [reason], "status": "UNAVAILABLE"}}
        if shape == "microsoft":
            payload = {"error": {"code": 503000, "message": message}}
        if shape == "aws":
            payload = {"__type": "ServiceUnavailableException", "Message": message}
        if shape == "api":
            request_id = state.get("request_id", "")
            payload = ErrorResponse(error="overloaded", message=message, request_id=request_id).model_dump(
                exclude_none=True
            )
        await _send_json(send, 503, payload, [(b"retry-after", str(refused.retry_after).encode())])

    def _shape(self, path: str) -> str | None:
        shape = self.paths.get(path)
        if shape is None:
            shape = next((s for p, s in self.patterns if p.fullmatch(path)), None)
        return shape

    def _may_refuse(self, scope: Scope, shape: str) -> bool:
        headers = {k.lower(): v for k, v in scope["headers"]}
        if shape == "aws" and headers.get(b"x-amz-target", b"").rsplit(b".", 1)[-1] not in AWS_DECODING:
            return False  # one path for every operation: only those that decode wait on the queue
        if self.known is None:
            return True
        if shape == "api":
            given = headers.get(b"x-api-key", b"")
        elif shape == "deepl":
            scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
            given = given.strip() if scheme.lower() == b"deepl-auth-key" else b""
        elif shape == "aws":  # the key is the signature's access key id
            found = re.search(rb"Credential=([^/,\s]+)/", headers.get(b"authorization", b""))
            given = found.group(1) if found else headers.get(b"x-api-key", b"")
        elif shape in ("google", "microsoft"):  # in the query, the API's own header, ours, or a bearer token
            google = shape == "google"
            scheme, _, bearer = headers.get(b"authorization", b"").partition(b" ")
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            in_query = (query.get("key" if google else "Subscription-Key") or [""])[-1].encode("latin-1")
            own = headers.get(b"x-goog-api-key" if google else b"ocp-apim-subscription-key", b"")
            given = (in_query or own) if google else (own or in_query)
            given = given or headers.get(b"x-api-key", b"") or (bearer.strip() if scheme.lower() == b"bearer" else b"")
        else:
            return False
        return self.known(given.decode("latin-1"))


async def _send_json(send: Send, status: int, payload: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    """A whole JSON response: ``payload`` with ``status`` and ``headers`` besides its type and length."""
    body = json.dumps(payload).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the buffered body, then passes through (http.disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
