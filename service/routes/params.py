"""What the APIs of other services (LibreTranslate's, DeepL's) share: a request's fields wherever their clients put
them (the query string, a JSON object, or a form, urlencoded or multipart), the documented shape of such a body,
and an error in the service's own shape."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request


class BadBody(ValueError):
    """A body that cannot be read; the message says why."""


class ShapedError(Exception):
    """An error an API answers in its own shape, with its status (and headers, e.g. Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def request_body(fields: dict[str, Any], required: list[str], multipart: bool = False) -> dict[str, Any]:
    """The documented request body (an operation's ``openapi_extra``): JSON or form-encoded, or multipart for files,
    as these services take them."""
    schema = {"type": "object", "properties": fields, "required": required}
    kinds = ["multipart/form-data"] if multipart else ["application/json", "application/x-www-form-urlencoded"]
    return {"requestBody": {"required": True, "content": {kind: {"schema": schema} for kind in kinds}}}


async def read_params(request: Request, lists: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The request's fields; a field named in ``lists`` keeps every value a form or query string repeats
    (``text=a&text=b``), any other its last."""
    query = request.query_params
    params: dict[str, Any] = {key: _values(query.getlist(key), key in lists) for key in query}
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise BadBody("Invalid JSON format") from None
        if not isinstance(body, dict):
            raise BadBody("Invalid JSON format: send an object")
        params.update(body)
    elif kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.form()
        except Exception as err:  # a malformed multipart body
            raise BadBody(f"Invalid form data: {err}") from None
        params.update({key: _values(form.getlist(key), key in lists) for key in form.keys()})
    return params


def _values(values: list[Any], keep_all: bool) -> Any:
    return values if keep_all else values[-1]
