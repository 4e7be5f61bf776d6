"""Google Cloud Translation's Basic API (v2) at its own path, /language/translate/v2: clients written for it work
with this server by changing the host (Google's Python client: ``translate_v2.Client(client_options={"api_endpoint":
"http://HOST:8000"})``).

Its field names, response shapes and status codes, as Google's v2 reference and its Python client
(``google-cloud-translate``) have them: ``POST`` (and ``GET``) ``/language/translate/v2`` (``q`` a string or a
list; form-encoded or in the query: repeated; ``target``; ``source``, detected when absent; ``format`` ``html``,
Google's default, or ``text``; ``model``), ``/detect`` (``q``) and ``/languages`` (``target``: with it, each
language's name). The key goes in ``key`` (query), ``X-Goog-Api-Key`` (or this server's ``X-API-Key``), or as an
OAuth bearer token (``Authorization: Bearer <MT_API_KEY>``). Errors are Google's ``{"error": {"code", "message",
"errors": [...], "status"}}``. Behind it is the server's own /translate path: the same model choice, limits,
batching and metrics.

How it maps: ``model`` ``nmt``/``base`` (Google's two) is the server's choice by language, another value names one
of the server's models (GET /models); without ``source`` each text's language is detected on its own, as Google
does, the texts of each language translated together, and a text already in the target language comes back as
it is (a page's text nodes sent in one request, some already translated); language names are English whatever
``target`` says. Refused
with a 400 that says so: customization ids (``cid``), which a plain model has none of. Nulls are absent fields, as
Google's Python client sends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, ValidationError

from service.deps import Service, ServiceState
from service.detection import language_name
from service.errors import CLIENT_ERRORS, as_api_error
from service.keys import Client, KeyRefused
from service.routes import translate as native
from service.routes.params import (
    BadBody,
    ShapedError,
    by_language,
    detect_each,
    log_groups,
    read_params,
    request_body,
)
from service.schemas import TranslateRequest

router = APIRouter(prefix="/language/translate/v2", tags=["Google-compatible"])

STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""Google's status names by HTTP status (google.rpc.Code)."""
REASON = {400: "invalid", 403: "forbidden", 404: "notFound", 413: "invalid", 429: "rateLimitExceeded"}
GOOGLE_MODELS = ("nmt", "base")
"""``model`` values that mean "Google's choice": here, the server's choice by language."""


class GoogleError(ShapedError):
    """An error in Google's shape, with its HTTP status."""


class GoogleTranslation(BaseModel):
    translatedText: str  # noqa: N815 (Google's field names)
    detectedSourceLanguage: str | None = Field(None, description="Without source: the language detected.")  # noqa: N815


class GoogleDetection(BaseModel):
    language: str
    confidence: float
    isReliable: bool  # noqa: N815


class GoogleLanguage(BaseModel):
    language: str
    name: str | None = Field(None, description="With target.")


_Q = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "description": "Text(s)."}
_LANG = {"type": "string", "description": "ISO 639-1 code.", "example": "de"}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"description": "Google's error shape: {error: {code, message, errors, status}}."} for code in codes}


def error_response(error: Exception) -> JSONResponse:
    """Google's answer to a GoogleError or to one of the server's own errors (CLIENT_ERRORS)."""
    err = error if isinstance(error, GoogleError) else as_api_error(error)
    status = 400 if err.status in (413, 415, 422) else err.status  # Google answers a text too long with a 400
    body = {
        "error": {
            "code": status,
            "message": err.message,
            "errors": [{"message": err.message, "domain": "global", "reason": REASON.get(status, "backendError")}],
            "status": STATUS.get(status, "UNKNOWN"),
        }
    }
    return JSONResponse(body, status_code=status, headers=err.headers)


async def _params(request: Request) -> dict[str, Any]:
    try:
        params = await read_params(request, frozenset({"q", "cid"}))
    except BadBody as err:
        raise GoogleError(400, str(err)) from None
    return {name: value for name, value in params.items() if value is not None}


async def _admitted(request: Request, service: ServiceState) -> tuple[dict[str, Any], Client | None]:
    """The request's fields and its client (charged one request), or GoogleError."""
    params = await _params(request)
    return params, check_key(service, request, params)


def check_key(service: ServiceState, request: Request, params: dict[str, Any]) -> Client | None:
    if "key" in params and not isinstance(params["key"], str):  # the documented type, key or no key
        raise GoogleError(400, "Invalid Value: key must be a string")
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    key = params.get("key") or request.headers.get("x-goog-api-key") or request.headers.get("x-api-key")
    if not key and scheme.lower() == "bearer":
        key = token.strip()
    try:
        client = service.keys.admit(key if isinstance(key, str) else None)
    except KeyRefused as err:
        if err.reason in ("missing", "wrong"):
            raise GoogleError(403 if err.reason == "missing" else 400, _KEY_MESSAGES[err.reason]) from None
        raise GoogleError(429, err.message, {"Retry-After": str(err.retry_after or 1)}) from None
    if client is not None:
        request.state.log_fields["api_key"] = client.name
    return client


_KEY_MESSAGES = {
    "missing": "The request is missing a valid API key: send key=<a key of the server> or X-Goog-Api-Key.",
    "wrong": "API key not valid. Please pass a valid API key.",
}


def _texts(params: dict[str, Any]) -> list[str]:
    q = params.get("q")
    texts = [q] if isinstance(q, str) else q
    if not texts:
        raise GoogleError(400, "Required Text")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise GoogleError(400, "Invalid Value: q must be a string or a list of strings")
    return texts


def _language(params: dict[str, Any], name: str, required: bool) -> str | None:
    value = params.get(name)
    if value in (None, ""):
        if required:
            raise GoogleError(400, "Target language is required" if name == "target" else f"Required {name}")
        return None
    if not isinstance(value, str):
        raise GoogleError(400, f"Invalid Value: {name} must be a language code such as de")
    return value.strip().split("-")[0].lower()  # Google's zh-CN, pt-BR: the language


def _request(texts: list[str], source: str | None, target: str, params: dict[str, Any]) -> TranslateRequest:
    text_format = params.get("format", "html")  # Google's default
    if not isinstance(text_format, str) or text_format not in ("html", "text"):
        raise GoogleError(400, f"Invalid Value: format {text_format!r}; use html or text")
    if params.get("cid", []) != []:
        raise GoogleError(400, "Customization ids (cid) are not supported: the server's models have none")
    model = params.get("model")
    if model is not None and not isinstance(model, str):
        raise GoogleError(400, "Invalid Value: model must be a string")
    try:
        return TranslateRequest(
            text=texts,
            source_lang=source or "auto",
            target_lang=target,
            model=None if model in (None, "", *GOOGLE_MODELS) else model,
            format=text_format,  # type: ignore[arg-type]
        )
    except ValidationError as err:
        first = err.errors()[0]
        names = {"text": "q", "source_lang": "source", "target_lang": "target"}
        field = names.get(str(first["loc"][0]), str(first["loc"][0])) if first["loc"] else "request"
        raise GoogleError(400, f"Invalid Value: {field}: {first['msg']}") from None


_TRANSLATE: dict[str, Any] = {
    "summary": "Google: translate text",
    "response_class": JSONResponse,
    "responses": {200: {"description": "{data: {translations: [...]}}"}, **_errors(400, 403, 404, 429, 500, 503, 504)},
    "openapi_extra": request_body(
        {
            "q": _Q,
            "target": _LANG,
            # Google's Python client sends the fields it was not given as nulls
            "source": {**_LANG, "type": ["string", "null"]},
            "format": {"type": ["string", "null"], "enum": ["html", "text", None], "default": "html"},
            "model": {"type": ["string", "null"], "description": "nmt, base (the server's choice) or a model's name."},
            "cid": {
                "type": ["array", "null"],
                "items": {"type": "string"},
                "maxItems": 0,
                "description": "Refused if any.",
            },
            "key": {"type": ["string", "null"], "description": "The server's MT_API_KEY, when it has one."},
        },
        ["q", "target"],
    ),
}


@router.post("", operation_id="google_translate", **_TRANSLATE)
@router.get("", operation_id="google_translate_get", **_TRANSLATE)
async def translate(request: Request, service: Service) -> Response:
    fields: dict[str, dict[str, Any]] = {}  # each language group's access log fields
    try:
        params, client = await _admitted(request, service)
        texts = _texts(params)
        target = _language(params, "target", required=True) or ""
        source = _language(params, "source", required=False)
        named = _request(texts, source, target, params).model is not None  # every field checked before detection
        native.check_limits(texts, service.settings.max_texts, service.settings.max_chars)  # ... and the sizes

        def build(group: list[str], language: str | None) -> TranslateRequest:
            return _request(group, language, target, params)

        answered = await translate_each(service, texts, source, target, named, build, client, fields)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    finally:
        log_groups(request.state.log_fields, fields)
    translations: list[dict[str, Any]] = [{} for _ in texts]
    for i, (text, language) in enumerate(answered):
        translations[i]["translatedText"] = text
        if source is None:
            translations[i]["detectedSourceLanguage"] = language
        if params.get("model"):
            translations[i]["model"] = params["model"]
    return JSONResponse({"data": {"translations": translations}})


async def translate_each(
    service: ServiceState,
    texts: list[str],
    source: str | None,
    target: str,
    named: bool,
    build: Callable[[list[str], str | None], TranslateRequest],
    client: Client | None,
    fields: dict[str, dict[str, Any]],
) -> list[tuple[str, str]]:
    """Each text's translation and the language it was read in. Without ``source`` (and a model ``named``, which
    translates every text) each text's language is detected on its own, as Google does, each language's texts are
    translated together (``build`` makes their request), and a text already in ``target`` comes back as it is
    (``fields``: each group's access log fields)."""
    if source is not None or named:
        groups = {source or "auto": list(range(len(texts)))}
    else:
        groups = by_language([d.language if d else None for d in await detect_each(service, texts)])

    async def group(language: str, indices: list[int]) -> list[tuple[int, str, str]]:
        if language == target:  # already in the language asked for: as it is, as Google answers it
            return [(i, texts[i], language) for i in indices]
        body = build([texts[i] for i in indices], None if language == "auto" else language)
        fields[language] = {}
        done = await native.translate_texts(service, body, fields[language], client=client)
        found = done.detected.language if done.detected else done.model.source_language
        said = found if language == "auto" else language
        return [(i, out.text, said) for i, out in zip(indices, done.texts, strict=True)]

    answered: list[tuple[str, str]] = [("", "")] * len(texts)
    for rows in await asyncio.gather(*(group(language, indices) for language, indices in groups.items())):
        for i, text, language in rows:
            answered[i] = (text, language)
    return answered


_DETECT: dict[str, Any] = {
    "summary": "Google: detect the language of texts",
    "response_class": JSONResponse,
    "responses": {200: {"description": "{data: {detections: [[...]]}}"}, **_errors(400, 403, 429)},
    "openapi_extra": request_body({"q": _Q}, ["q"]),
}


@router.post("/detect", operation_id="google_detect", **_DETECT)
@router.get("/detect", operation_id="google_detect_get", **_DETECT)
async def detect(request: Request, service: Service) -> Response:
    try:
        params, _ = await _admitted(request, service)
        texts = _texts(params)
        native.check_limits(texts, service.settings.max_texts, service.settings.max_chars)
        if sum(len(t) for t in texts) > service.settings.max_chars:
            raise GoogleError(400, f"Text too long: at most {service.settings.max_chars} characters a request")
        detections = []
        for best in await detect_each(service, texts):
            detections.append(
                [
                    {
                        "language": best.language if best else "und",
                        "confidence": round(best.confidence, 4) if best else 0.0,
                        "isReliable": False,  # Google deprecated the field; it always says false
                    }
                ]
            )
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    return JSONResponse({"data": {"detections": detections}})


_LANGUAGES: dict[str, Any] = {
    "summary": "Google: the languages served",
    "response_class": JSONResponse,
    "responses": {200: {"description": "{data: {languages: [...]}}"}, **_errors(400, 403, 429)},
    "openapi_extra": {
        "parameters": [{"name": "target", "in": "query", "required": False, "schema": {"type": "string"}}]
    },
}


@router.get("/languages", operation_id="google_languages", **_LANGUAGES)
@router.post("/languages", operation_id="google_languages_post", **_LANGUAGES)
async def languages(request: Request, service: Service) -> Response:
    try:
        params, _ = await _admitted(request, service)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    named = bool(params.get("target"))
    body = [
        {"language": code, **({"name": language_name(code)} if named else {})} for code in service.models.languages()
    ]
    return JSONResponse({"data": {"languages": body}})
