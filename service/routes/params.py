"""What the APIs of other services (LibreTranslate's, DeepL's, Google's, Microsoft's) share: a request's fields
wherever their clients put them (the query string, a JSON object, or a form, urlencoded or multipart), the
documented shape of such a body, an error in the service's own shape, and texts detected one by one and translated
in groups of one language."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fastapi import Request

from service.deps import ServiceState
from service.detection import Detection


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


async def detect_each(service: ServiceState, texts: Sequence[str]) -> list[Detection | None]:
    """The likeliest language of each text on its own, among those served (None where nothing is detected)."""
    found = await service.models.detect_each(list(texts))
    return [detections[0] if detections else None for detections in found]


def by_language(languages: Sequence[str | None], fallback: str | None = None) -> dict[str, list[int]]:
    """Each text's index under its language (Google and Microsoft detect text by text, then translate each
    language's texts together); a text without one goes with ``fallback``, else the first language found, else
    under "auto" (the server's own choice)."""
    fallback = fallback or next((language for language in languages if language is not None), "auto")
    groups: dict[str, list[int]] = {}
    for i, language in enumerate(languages):
        groups.setdefault(language or fallback, []).append(i)
    return groups


def log_groups(line: dict[str, Any], groups: dict[Any, dict[str, Any]]) -> None:
    """The access log line of a request translated in groups (a language detected, a target asked for): counts
    summed, the rest as the first group has it."""
    for fields in groups.values():
        for name, value in fields.items():
            if isinstance(value, int) and not isinstance(value, bool):
                line[name] = line.get(name, 0) + value
            else:
                line.setdefault(name, value)
    if len(groups) > 1:
        line["language_groups"] = len(groups)
