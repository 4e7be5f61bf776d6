"""LibreTranslate's API under /libretranslate/: clients written for LibreTranslate work with this server.

Its field names, response shapes and status codes (LibreTranslate's API documentation, and its Python client
``libretranslatepy``): ``POST translate`` (``q`` a string or a list, ``source`` incl. ``auto``, ``target``,
``format``, ``alternatives``, ``api_key``), ``GET languages``, ``POST detect``, ``POST translate_file`` (the
files /translate/document takes: text, markup, catalogs and office files) with ``GET download_file/<name>``,
``GET frontend/settings`` (the text limit, whether a key is needed, the file formats) and ``POST suggest``
(refused: no suggestions kept).
Bodies may be JSON, form-encoded or multipart, as LibreTranslate accepts; errors are ``{"error": message}``. Behind
it is the server's own /translate path (the same model choice, limits, batching and metrics); ``format: html`` keeps the
markup (core/markup.py), without alternatives as in LibreTranslate.
"""

from __future__ import annotations

import uuid
from pathlib import PurePath
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, ValidationError

from core.documents import KINDS, media_type
from service.deps import Service, ServiceState
from service.detection import language_name
from service.document_store import DocumentStore
from service.errors import CLIENT_ERRORS, as_api_error
from service.keys import Client, KeyRefused
from service.routes import translate as native
from service.routes.params import BadBody, ShapedError, read_params, request_body
from service.schemas import TranslateRequest

router = APIRouter(prefix="/libretranslate", tags=["LibreTranslate-compatible"])

MAX_ALTERNATIVES = 15
"""n-best is at most the beam, and the beam at most 16."""

FRONTEND_TIMEOUT_MS = 500
"""What ``frontend/settings`` tells a page to wait after typing before it translates."""
KEPT_FILES = 64
"""Translated files kept for download_file, newest last; older ones are forgotten."""


class LtErrorBody(BaseModel):
    error: str = Field(examples=["Invalid request: missing q parameter"])


class LtDetected(BaseModel):
    confidence: float = Field(description="0 to 100.", examples=[97.3])
    language: str | None = Field(examples=["de"])


class LtTranslation(BaseModel):
    translatedText: str | list[str]  # noqa: N815 (LibreTranslate's field names)
    detectedLanguage: LtDetected | list[LtDetected] | None = Field(None, description='With source "auto".')  # noqa: N815
    alternatives: list[str] | list[list[str]] | None = Field(None, description="With alternatives > 0.")


class LtLanguage(BaseModel):
    code: str
    name: str
    targets: list[str]


class LtFile(BaseModel):
    translatedFileUrl: str  # noqa: N815


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers of a route; one that checks the key (403) may also answer a key's limits (429)."""
    limits = (429,) if 403 in codes else ()
    return {code: {"model": LtErrorBody, "description": "LibreTranslate's error shape."} for code in (*codes, *limits)}


_Q = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "description": "Text(s)."}
_KEY = {"type": "string", "description": "The server's MT_API_KEY, when it has one."}
_LANG = {"type": "string", "description": "ISO 639-1 code.", "example": "de"}
_TRANSLATE_BODY = request_body(
    {
        "q": _Q,
        "source": {"type": "string", "description": 'ISO 639-1 code, or "auto".', "example": "en"},
        "target": _LANG,
        "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
        "alternatives": {"type": "integer", "minimum": 0, "maximum": MAX_ALTERNATIVES, "default": 0},
        "api_key": _KEY,
    },
    ["q", "source", "target"],
)


class LtError(ShapedError):
    """An error in LibreTranslate's shape: ``{"error": message}`` with its status."""


def _response(status: int, body: object, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def _error(error: Exception) -> JSONResponse:
    """LibreTranslate's answer to an LtError or to one of the server's own errors (CLIENT_ERRORS)."""
    err = error if isinstance(error, LtError) else as_api_error(error)
    return _response(err.status, {"error": err.message}, err.headers)


async def _params(request: Request) -> dict[str, Any]:
    """The request's fields from JSON, a form (urlencoded or multipart) or the query string."""
    try:
        return await read_params(request)
    except BadBody as err:
        raise LtError(400, str(err)) from None


def _check_key(service: ServiceState, request: Request, params: dict[str, Any]) -> Client | None:
    """The request's client (service/keys.py), charged one request; None when the server needs no key."""
    if "api_key" in params and not isinstance(params["api_key"], str):  # the documented type, key or no key
        raise LtError(400, "Invalid request: api_key must be a string")
    try:
        client = service.keys.admit(params.get("api_key") or request.headers.get("x-api-key"))
    except KeyRefused as err:
        if err.reason == "missing":
            raise LtError(403, "Invalid API key: send it as api_key (one of the server's keys)") from None
        if err.reason == "wrong":
            raise LtError(403, "Invalid API key") from None
        raise LtError(429, err.message, {"Retry-After": str(err.retry_after or 1)}) from None
    if client is not None:
        request.state.log_fields["api_key"] = client.name
    return client


def _required(params: dict[str, Any], name: str) -> Any:
    value = params.get(name)
    if value is None or value == "" or value == []:
        raise LtError(400, f"Invalid request: missing {name} parameter")
    return value


def _texts(params: dict[str, Any]) -> str | list[str]:
    """``q``: a string or a list of strings."""
    q = _required(params, "q")
    if not isinstance(q, str) and not (isinstance(q, list) and all(isinstance(t, str) for t in q)):
        raise LtError(400, "Invalid request: q must be a string or a list of strings")
    return q  # type: ignore[no-any-return]


def _language(params: dict[str, Any], name: str) -> str:
    value = _required(params, name)
    if not isinstance(value, str):
        raise LtError(400, f"Invalid request: {name} must be a language code")
    return value.strip().lower()


def _alternatives(params: dict[str, Any]) -> int:
    raw = params.get("alternatives", 0)
    try:
        count = max(0, int(raw))
    except (TypeError, ValueError):
        raise LtError(400, "Invalid request: alternatives parameter is not a number") from None
    if count > MAX_ALTERNATIVES:
        raise LtError(400, f"Invalid request: alternatives parameter must be <= {MAX_ALTERNATIVES}")
    return count


def _format(params: dict[str, Any]) -> str:
    text_format = params.get("format") or "text"
    if text_format not in ("text", "html"):
        raise LtError(400, f"{text_format} format is not supported")
    return str(text_format)


def _request(
    q: str | list[str], source: str, target: str, alternatives: int, text_format: str = "text"
) -> TranslateRequest:
    n_best = 1 if text_format == "html" else alternatives + 1  # as LibreTranslate: no alternatives for HTML
    try:
        return TranslateRequest(
            text=q,
            source_lang=source,
            target_lang=target,
            n_best=n_best,
            beam_size=max(4, n_best),
            format=text_format,  # type: ignore[arg-type]
        )
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "request"
        names = {"text": "q", "source_lang": "source", "target_lang": "target"}
        field = names.get(where.split(".")[0], where)
        raise LtError(400, f"Invalid request: {field}: {first['msg']}") from None


def _detected(detected: Any) -> dict[str, Any]:
    if detected is None:
        return {"confidence": 0.0, "language": None}
    return {"confidence": round(100 * detected.confidence, 1), "language": detected.language}


@router.post(
    "/translate",
    summary="LibreTranslate: translate text",
    response_class=JSONResponse,
    responses={200: {"model": LtTranslation}, **_errors(400, 403, 413, 500, 503, 504)},
    openapi_extra=_TRANSLATE_BODY,
)
async def translate(request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        client = _check_key(service, request, params)
        q = _texts(params)
        source, target = _language(params, "source"), _language(params, "target")
        text_format = _format(params)
        alternatives = _alternatives(params)
        body = _request(q, source, target, alternatives, text_format)
        done = await native.translate_texts(service, body, request.state.log_fields, client=client)
    except (LtError, *CLIENT_ERRORS) as err:
        return _error(err)
    texts = [t.text for t in done.texts]
    others = [[a.text for a in (t.alternatives or [])][:alternatives] for t in done.texts]
    batch = isinstance(q, list)
    result: dict[str, Any] = {"translatedText": texts if batch else texts[0]}
    if source == "auto":
        detected = _detected(done.detected)
        result["detectedLanguage"] = [detected] * len(texts) if batch else detected
    if alternatives > 0:
        result["alternatives"] = others if batch else others[0]
    return _response(200, result)


@router.get(
    "/languages",
    summary="LibreTranslate: the languages served",
    response_class=JSONResponse,
    responses={200: {"model": list[LtLanguage]}},
)
async def languages(service: Service) -> Response:
    models = service.models
    targets: dict[str, list[str]] = {}
    for slot in models.slots:
        pair = models.pair_of(slot)
        if pair is not None:
            targets.setdefault(pair.source, [])
            if pair.target not in targets[pair.source]:
                targets[pair.source].append(pair.target)
    body = [{"code": code, "name": language_name(code), "targets": sorted(to)} for code, to in targets.items()]
    return _response(200, body)


class LtSettingsLanguage(BaseModel):
    code: str
    name: str


class LtSettingsLanguages(BaseModel):
    source: LtSettingsLanguage
    target: LtSettingsLanguage


class LtSettings(BaseModel):
    charLimit: int = Field(description="MT_MAX_CHARS: the longest text.")  # noqa: N815
    frontendTimeout: int = Field(description="Milliseconds a page waits after typing before it translates.")  # noqa: N815
    apiKeys: bool  # noqa: N815
    keyRequired: bool  # noqa: N815
    suggestions: bool = Field(description="Always false: this server takes no suggestions.")
    filesTranslation: bool  # noqa: N815
    supportedFilesFormat: list[str]  # noqa: N815
    language: LtSettingsLanguages


@router.get(
    "/frontend/settings",
    summary="LibreTranslate: what a client needs to know of this server",
    response_class=JSONResponse,
    responses={200: {"model": LtSettings}},
)
async def frontend_settings(service: Service) -> Response:
    pairs = service.models.pairs()
    source, target = (pairs[0].source, pairs[0].target) if pairs else ("en", "de")
    keyed = bool(service.keys)
    body = {
        "charLimit": service.settings.max_chars,
        "frontendTimeout": FRONTEND_TIMEOUT_MS,
        "apiKeys": keyed,
        "keyRequired": keyed,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": sorted(KINDS),
        "language": {
            "source": {"code": source, "name": language_name(source)},
            "target": {"code": target, "name": language_name(target)},
        },
    }
    return _response(200, body)


@router.post(
    "/suggest",
    summary="LibreTranslate: suggest a better translation (not taken here)",
    response_class=JSONResponse,
    responses={403: {"model": LtErrorBody, "description": "Always: no suggestions are kept."}},
)
async def suggest() -> Response:
    return _response(403, {"error": "Suggestions are disabled on this server: it keeps no corrections"})


@router.post(
    "/detect",
    summary="LibreTranslate: detect the language of a text",
    response_class=JSONResponse,
    responses={200: {"model": list[LtDetected]}, **_errors(400, 403)},
    openapi_extra=request_body({"q": _Q, "api_key": _KEY}, ["q"]),
)
async def detect(request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        q = _texts(params)
        text = "\n".join(q) if isinstance(q, list) else q
        if len(text) > service.settings.max_chars:
            raise LtError(
                400, f"Invalid request: request ({len(text)}) exceeds text limit ({service.settings.max_chars})"
            )
        found = await service.models.detect(text)
    except (LtError, *CLIENT_ERRORS) as err:
        return _error(err)
    return _response(200, [_detected(d) for d in found])


@router.post(
    "/translate_file",
    summary="LibreTranslate: translate a file (the kinds /translate/document takes)",
    response_class=JSONResponse,
    responses={200: {"model": LtFile}, **_errors(400, 403, 413, 500, 503, 504)},
    openapi_extra=request_body(
        {"file": {"type": "string", "format": "binary"}, "source": _LANG, "target": _LANG, "api_key": _KEY},
        ["file", "source", "target"],
        multipart=True,
    ),
)
async def translate_file(request: Request, service: Service) -> Response:
    try:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "multipart/form-data":
            raise LtError(400, "Invalid request: send the file as multipart/form-data")
        try:
            form = await request.form()
        except Exception as err:
            raise LtError(400, f"Invalid form data: {err}") from None
        params = {key: form.getlist(key)[-1] for key in form.keys()}
        client = _check_key(service, request, params)
        upload = params.get("file")
        if upload is None or isinstance(upload, str):
            raise LtError(400, "Invalid request: missing file parameter")
        name = PurePath(upload.filename or "").name
        if not name:
            raise LtError(400, "Invalid request: empty file")
        if PurePath(name).suffix.lower() not in KINDS:
            formats = ", ".join(sorted(KINDS))
            raise LtError(400, f"Invalid request: file format not supported (this server translates {formats})")
        source, target = _language(params, "source"), _language(params, "target")
        options = {"source_lang": source, "target_lang": target}
        data = await upload.read()
        translated, _ = await native.translate_file(
            service, name, data, options, request.state.log_fields, client=client
        )
    except (LtError, *CLIENT_ERRORS) as err:
        return _error(err)
    key = f"{uuid.uuid4()}.{name}"
    _files(request).put(key, translated)
    url = str(request.url_for("libretranslate_download", filename=key))
    return _response(200, {"translatedFileUrl": url})


@router.get(
    "/download_file/{filename}",
    name="libretranslate_download",
    summary="LibreTranslate: a translated file",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "The file."}, **_errors(404)},
)
async def download_file(filename: str, request: Request) -> Response:
    data = _files(request).get(filename)
    if data is None:
        return _response(404, {"error": "No such file: translated files are kept for the last 64 translations"})
    download = filename.split(".", 1)[1] if "." in filename else filename
    return Response(
        data,
        media_type=media_type(download),
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{_quote(download)}"},
    )


def _files(request: Request) -> DocumentStore:
    """The app's translated files (service/document_store.py: in MT_DOCUMENT_DIR/libretranslate when it is set)."""
    store: DocumentStore = request.app.state.libretranslate_files
    return store


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")
