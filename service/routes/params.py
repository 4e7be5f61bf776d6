"""The fields of a request to the APIs of other services (LibreTranslate's, DeepL's), wherever their clients put
them: the query string, a JSON object, or a form (urlencoded or multipart)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request


class BadBody(ValueError):
    """A body that cannot be read; the message says why."""


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
