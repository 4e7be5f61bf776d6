"""Google Cloud Translation's Advanced API (v3) at its own paths, /v3/projects/{project}/locations/{location}:...:
clients written for it work with this server by changing the endpoint (Google's Python client:
``translate_v3.TranslationServiceClient(transport="rest", client_options={"api_endpoint": "http://HOST:8000"})``;
REST, not gRPC). Any project and location name is taken; the parent without a location too, as Google's.

``:translateText`` (``contents``, ``targetLanguageCode``, ``sourceLanguageCode`` detected text by text when absent,
``mimeType`` ``text/html`` (Google's default) or ``text/plain``, ``model``, ``glossaryConfig``), ``:detectLanguage``,
``/supportedLanguages``, ``:translateDocument`` (inline content: the kinds of documents the server translates,
by their media types) and the glossaries: list, get and delete. A glossary is one of the server's (the store DeepL's
and Amazon's APIs keep: MT_GLOSSARY_DIR), named by its name
(``projects/P/locations/L/glossaries/NAME``); Google creates glossaries from files in Cloud Storage, which this
server cannot read, so they are made through DeepL's or Amazon's API, and createGlossary says so. Errors are
Google's ``{"error": {"code", "message", "status"}}``.

How it maps: ``model`` ``.../models/general/nmt`` (or ``general/base``, or none) is the server's choice by language,
``.../models/NAME`` one of the server's models by name; with ``glossaryConfig`` the answer has both
``translations`` (without it) and ``glossaryTranslations`` (with it), as Google's.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from core.documents import KINDS
from service.deps import Service, ServiceState
from service.detection import language_name
from service.errors import CLIENT_ERRORS
from service.glossary_store import StoredGlossary
from service.keys import Client
from service.routes import translate as native
from service.routes.deepl import glossaries
from service.routes.google import GoogleError, check_key, error_response, translate_each
from service.routes.params import log_groups
from service.schemas import TranslateRequest

router = APIRouter(prefix="/v3/projects/{project}", tags=["Google-compatible (v3)"])

GENERAL_MODELS = ("general/nmt", "general/base")
"""Google's own models: here, the server's choice by language."""
NAME = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
"""A glossary name that can stand in a path."""
SUFFIX_OF = {media: suffix for suffix, media in reversed(KINDS.items())}
"""translateDocument's mime types: the file name the server's document reader goes by."""


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"description": "Google's error shape: {error: {code, message, errors, status}}."} for code in codes}


def _operation(summary: str, answer: str, codes: tuple[int, ...], **extra: Any) -> dict[str, Any]:
    """A route's documentation: its summary, its answer, its error statuses and ``openapi_extra``."""
    return {
        "summary": summary,
        "response_class": JSONResponse,
        "responses": {200: {"description": answer}, **_errors(*codes)},
        "openapi_extra": extra,
    }


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _at(operation: dict[str, Any], *names: str) -> dict[str, Any]:
    """An operation's arguments with the path's parameters (project, location) documented: the handlers read them
    from the request, since one handler serves the parent with and without a location."""
    extra = dict(operation.get("openapi_extra", {}))
    path = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names]
    extra["parameters"] = [*path, *extra.get("parameters", [])]
    return {**operation, "openapi_extra": extra}


async def _admitted(request: Request, service: ServiceState) -> tuple[dict[str, Any], Client | None]:
    """The JSON body and the client (charged one request), or GoogleError."""
    client = check_key(service, request, dict(request.query_params))
    if request.method != "POST":
        return {}, client
    try:
        body = await request.json() if await request.body() else {}
    except ValueError:
        raise GoogleError(400, "Invalid JSON payload received.") from None
    if not isinstance(body, dict):
        raise GoogleError(400, "Invalid JSON payload received: send an object.")
    return body, client


def _string(body: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = body.get(name)
    if value in (None, ""):
        if required:
            raise GoogleError(400, f"Field {name} is required.")
        return None
    if not isinstance(value, str):
        raise GoogleError(400, f"Invalid value at '{name}': a string")
    return value


def _language(body: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = _string(body, name, required)
    if value is None:
        return None
    language = value.split("-")[0].lower()
    if len(language) != 2 or not language.isalpha() or not language.isascii():
        raise GoogleError(400, f"Invalid value at '{name}': {value!r} is not a language code such as de")
    return language


def _model(body: dict[str, Any]) -> str | None:
    """The server's model a ``model`` path names; None: the server's choice."""
    value = _string(body, "model")
    if value is None:
        return None
    name = value.split("/models/", 1)[-1]
    return None if name in GENERAL_MODELS else name


def _html(body: dict[str, Any]) -> bool:
    kind = _string(body, "mimeType") or "text/html"  # Google's default
    if kind not in ("text/html", "text/plain"):
        raise GoogleError(400, f"Invalid value at 'mimeType': {kind!r}; use text/html or text/plain")
    return kind == "text/html"


def _glossary(request: Request, body: dict[str, Any], source: str | None, target: str) -> dict[str, str] | None:
    """The entries of ``glossaryConfig``'s glossary for the pair; None without one."""
    config = body.get("glossaryConfig")
    if config is None:
        return None
    if not isinstance(config, dict) or not isinstance(config.get("glossary"), str):
        raise GoogleError(400, "Invalid value at 'glossary_config': {glossary: projects/P/locations/L/glossaries/G}")
    if source is None:
        raise GoogleError(400, "sourceLanguageCode is required when a glossary is used.")
    glossary = glossaries(request).named(config["glossary"].rsplit("/", 1)[-1])
    if glossary is None:
        raise GoogleError(404, f"Glossary not found: {config['glossary']}")
    dictionary = glossary.dictionary(source, target)
    if dictionary is None:
        raise GoogleError(400, f"The glossary {glossary.name!r} has no entries for {source}->{target}.")
    return dict(dictionary.entries)


def _request(
    texts: list[str], source: str | None, target: str, model: str | None, html: bool, terms: dict[str, str] | None
) -> TranslateRequest:
    try:
        return TranslateRequest(
            text=texts,
            source_lang=source or "auto",
            target_lang=target,
            model=model,
            format="html" if html else "text",
            glossary=terms,
        )
    except ValidationError as err:
        first = err.errors()[0]
        raise GoogleError(400, f"Invalid value at '{'.'.join(map(str, first['loc']))}': {first['msg']}") from None


_TRANSLATE_TEXT = _operation(
    "Google v3: translate texts",
    "{translations: [{translatedText, detectedLanguageCode?, model?}], glossaryTranslations?}",
    (400, 401, 403, 404, 429, 500, 503, 504),
    requestBody=_json_body(
        {
            "type": "object",
            "required": ["contents", "targetLanguageCode"],
            "properties": {
                "contents": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "targetLanguageCode": {"type": "string", "example": "de"},
                "sourceLanguageCode": {"type": ["string", "null"]},
                "mimeType": {"type": ["string", "null"], "enum": ["text/html", "text/plain", None]},
                "model": {"type": ["string", "null"]},
                "glossaryConfig": {
                    "type": ["object", "null"],
                    "properties": {"glossary": {"type": "string"}, "ignoreCase": {"type": "boolean"}},
                    "required": ["glossary"],
                },
            },
        }
    ),
)


@router.post(
    "/locations/{location}:translateText",
    operation_id="google_v3_translate",
    **_at(_TRANSLATE_TEXT, "project", "location"),
)
@router.post(":translateText", operation_id="google_v3_translate_global", **_at(_TRANSLATE_TEXT, "project"))
async def translate_text(request: Request, service: Service) -> Response:
    fields: dict[str, dict[str, Any]] = {}
    try:
        body, client = await _admitted(request, service)
        texts = body.get("contents")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise GoogleError(400, "Field contents is required: a list of strings.")
        target = _language(body, "targetLanguageCode", required=True) or ""
        source = _language(body, "sourceLanguageCode")
        model, html = _model(body), _html(body)
        terms = _glossary(request, body, source, target)
        _request(texts, source, target, model, html, terms)  # every field checked before any detection
        native.check_limits(texts, service.settings.max_texts, service.settings.max_chars)
        if _transliterated(body):
            raise GoogleError(400, "Transliteration is not served: the server's languages are in Latin")

        def build(entries: dict[str, str] | None) -> Callable[[list[str], str | None], TranslateRequest]:
            return lambda group, language: _request(group, language, target, model, html, entries)

        plain = translate_each(service, texts, source, target, model is not None, build(None), client, fields)
        if terms is None:
            answered, glossed = await plain, None
        else:
            with_terms = translate_each(service, texts, source, target, False, build(terms), client, {})
            answered, glossed = await asyncio.gather(plain, with_terms)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    finally:
        log_groups(request.state.log_fields, fields)

    def translation(text: str, language: str) -> dict[str, Any]:
        out: dict[str, Any] = {"translatedText": text}
        if source is None:
            out["detectedLanguageCode"] = language
        if body.get("model"):
            out["model"] = body["model"]
        return out

    answer: dict[str, Any] = {"translations": [translation(*row) for row in answered]}
    if glossed is not None:
        config = {"glossary": body["glossaryConfig"]["glossary"]}
        answer["glossaryTranslations"] = [{**translation(*row), "glossaryConfig": config} for row in glossed]
    return JSONResponse(answer)


def _transliterated(body: dict[str, Any]) -> bool:
    config = body.get("transliterationConfig")
    return isinstance(config, dict) and config.get("enableTransliteration") is True


_DETECT = _operation(
    "Google v3: detect the language of a text",
    "{languages: [{languageCode, confidence}]}",
    (400, 401, 403, 429),
    requestBody=_json_body(
        {
            "type": "object",
            "required": ["content"],
            "properties": {"content": {"type": "string"}, "mimeType": {"type": ["string", "null"]}},
        }
    ),
)


@router.post(
    "/locations/{location}:detectLanguage", operation_id="google_v3_detect", **_at(_DETECT, "project", "location")
)
@router.post(":detectLanguage", operation_id="google_v3_detect_global", **_at(_DETECT, "project"))
async def detect_language(request: Request, service: Service) -> Response:
    try:
        body, _ = await _admitted(request, service)
        content = _string(body, "content", required=True) or ""
        _html(body)
        native.check_limits([content], service.settings.max_texts, service.settings.max_chars)
        found = await service.models.detect(content)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    languages = [{"languageCode": d.language, "confidence": round(d.confidence, 4)} for d in found[:1]]
    return JSONResponse({"languages": languages})


_LANGUAGES = _operation(
    "Google v3: the languages served",
    "{languages: [{languageCode, displayName?, supportSource, supportTarget}]}",
    (400, 401, 403, 429),
    parameters=[
        {"name": "displayLanguageCode", "in": "query", "schema": {"type": "string"}},
        {"name": "model", "in": "query", "schema": {"type": "string"}},
    ],
)


@router.get(
    "/locations/{location}/supportedLanguages",
    operation_id="google_v3_languages",
    **_at(_LANGUAGES, "project", "location"),
)
@router.get("/supportedLanguages", operation_id="google_v3_languages_global", **_at(_LANGUAGES, "project"))
async def supported_languages(request: Request, service: Service) -> Response:
    try:
        await _admitted(request, service)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    pairs = service.models.pairs()
    named = bool(request.query_params.get("displayLanguageCode"))  # names in English, whatever it says
    languages = [
        {
            "languageCode": code,
            **({"displayName": language_name(code)} if named else {}),
            "supportSource": any(p.source == code for p in pairs),
            "supportTarget": any(p.target == code for p in pairs),
        }
        for code in service.models.languages()
    ]
    return JSONResponse({"languages": languages})


_DOCUMENT = _operation(
    "Google v3: translate a document given inline",
    "{documentTranslation: {byteStreamOutputs: [base64], mimeType, detectedLanguageCode?}}",
    (400, 401, 403, 404, 429, 500, 503, 504),
    requestBody=_json_body(
        {
            "type": "object",
            "required": ["targetLanguageCode", "documentInputConfig"],
            "properties": {
                "targetLanguageCode": {"type": "string"},
                "sourceLanguageCode": {"type": ["string", "null"]},
                "documentInputConfig": {
                    "type": "object",
                    "required": ["content", "mimeType"],
                    "properties": {"content": {"type": "string"}, "mimeType": {"type": ["string", "null"]}},
                },
            },
        }
    ),
)


@router.post(
    "/locations/{location}:translateDocument",
    operation_id="google_v3_document",
    **_at(_DOCUMENT, "project", "location"),
)
async def translate_document(request: Request, service: Service) -> Response:
    try:
        body, client = await _admitted(request, service)
        config = body.get("documentInputConfig")
        if not isinstance(config, dict) or not isinstance(config.get("content"), str):
            raise GoogleError(400, "Field documentInputConfig.content is required (inline, base64; no Cloud Storage).")
        kind = _string(config, "mimeType", required=True) or ""
        if kind not in SUFFIX_OF:
            raise GoogleError(
                400, f"Unsupported mimeType {kind!r}: the server translates {', '.join(sorted(SUFFIX_OF))}"
            )
        try:
            content = base64.b64decode(config["content"], validate=True)
        except (binascii.Error, ValueError):
            raise GoogleError(400, "Invalid value at 'document_input_config.content': base64") from None
        target = _language(body, "targetLanguageCode", required=True) or ""
        source = _language(body, "sourceLanguageCode")
        terms = _glossary(request, body, source, target)
        name = "document" + SUFFIX_OF[kind]
        fields = request.state.log_fields

        async def translated(entries: dict[str, str] | None) -> dict[str, Any]:
            options = {
                "source_lang": source or "auto",
                "target_lang": target,
                "model": _model(body),
                "glossary": entries,
            }
            written, media = await native.translate_file(service, name, content, options, fields, client=client)
            out = {"byteStreamOutputs": [base64.b64encode(written).decode()], "mimeType": media.split(";")[0]}
            if source is None and "detected_language" in fields:
                out["detectedLanguageCode"] = fields["detected_language"]
            return out

        answer: dict[str, Any] = {"documentTranslation": await translated(None)}
        if terms is not None:
            answer["glossaryDocumentTranslation"] = await translated(terms)
            answer["glossaryConfig"] = body["glossaryConfig"]
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    if body.get("model"):
        answer["model"] = body["model"]
    return JSONResponse(answer)


def _info(glossary: StoredGlossary, request: Request) -> dict[str, Any]:
    """Google's Glossary: one language pair, or the set of languages of several."""
    project, location = request.path_params["project"], request.path_params.get("location", "global")
    out: dict[str, Any] = {"name": f"projects/{project}/locations/{location}/glossaries/{glossary.name}"}
    if len(glossary.dictionaries) == 1:
        pair = glossary.dictionaries[0]
        out["languagePair"] = {"sourceLanguageCode": pair.source_lang, "targetLanguageCode": pair.target_lang}
    else:
        codes = {c for d in glossary.dictionaries for c in (d.source_lang, d.target_lang)}
        out["languageCodesSet"] = {"languageCodes": sorted(codes)}
    out["entryCount"] = sum(len(d.entries) for d in glossary.dictionaries)
    out["submitTime"] = out["endTime"] = glossary.creation_time
    out["displayName"] = glossary.name
    return out


def _glossary_route(operation_id: str, summary: str, answer: str, *codes: int) -> dict[str, Any]:
    return {"operation_id": operation_id, **_at(_operation(summary, answer, codes), "project", "location")}


async def _existing(request: Request, service: ServiceState, name: str) -> StoredGlossary:
    """The glossary of that name (the request admitted first), or GoogleError 404."""
    await _admitted(request, service)
    glossary = await asyncio.to_thread(glossaries(request).named, name)
    if glossary is None:
        raise GoogleError(404, f"Glossary not found: {name}")
    return glossary


@router.get(
    "/locations/{location}/glossaries",
    **_glossary_route(
        "google_v3_glossaries", "Google v3: the server's glossaries", "{glossaries: [...]}", 400, 401, 403, 429
    ),
)
async def list_glossaries(request: Request, service: Service) -> Response:
    try:
        await _admitted(request, service)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    stored = await asyncio.to_thread(glossaries(request).all)
    return JSONResponse({"glossaries": [_info(g, request) for g in stored if NAME.match(g.name)]})


@router.get(
    "/locations/{location}/glossaries/{name}",
    **_glossary_route("google_v3_glossary", "Google v3: a glossary", "The glossary.", 400, 401, 403, 404, 429),
)
async def get_glossary(name: str, request: Request, service: Service) -> Response:
    try:
        glossary = await _existing(request, service, name)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    return JSONResponse(_info(glossary, request))


@router.delete(
    "/locations/{location}/glossaries/{name}",
    **_glossary_route(
        "google_v3_delete_glossary",
        "Google v3: delete a glossary (an operation already done)",
        "A long-running operation, done.",
        *(400, 401, 403, 404, 429),
    ),
)
async def delete_glossary(name: str, request: Request, service: Service) -> Response:
    try:
        glossary = await _existing(request, service, name)
        await asyncio.to_thread(glossaries(request).remove, glossary.glossary_id)
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
    info = _info(glossary, request)
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    response = {
        "@type": "type.googleapis.com/google.cloud.translation.v3.DeleteGlossaryResponse",
        "name": info["name"],
        "submitTime": now,
        "endTime": now,
    }
    return JSONResponse(
        {"name": info["name"].replace("/glossaries/", "/operations/delete-"), "done": True, "response": response}
    )


@router.post(
    "/locations/{location}/glossaries",
    **_glossary_route(
        "google_v3_create_glossary",
        "Google v3: create a glossary (refused: made through DeepL's or Amazon's API)",
        "Never: glossaries are made through DeepL's or Amazon's API.",
        *(400, 401, 403, 429),
    ),
)
async def create_glossary(request: Request, service: Service) -> Response:
    try:
        await _admitted(request, service)
        raise GoogleError(
            400,
            "Glossaries are made from files in Cloud Storage, which this server cannot read: create one through "
            "DeepL's API (POST /deepl/v3/glossaries) or Amazon's (ImportTerminology), then name it here.",
        )
    except (GoogleError, *CLIENT_ERRORS) as err:
        return error_response(err)
