"""DeepL's API (v2, and v3's glossaries) under /deepl/: tools and client libraries written for DeepL work with this
server.

Its field names, response shapes and status codes, as DeepL's API documentation and its Python client (``deepl``)
have them: ``POST v2/translate`` (``text`` a list, ``source_lang`` optional: detected when absent, ``target_lang``
with DeepL's regional codes ``EN-GB``/``EN-US``/``PT-BR``/``PT-PT`` read as the language, ``tag_handling``,
``split_sentences``, ``glossary_id``/``glossary_ids``), ``v2/languages``, ``v2/usage``, glossaries
(``v2/glossaries`` of one language pair, ``v3/glossaries`` of several, ``v2/glossary-language-pairs``; kept by
service/glossary_store.py, applied as the server's own glossaries, inference/glossary.py) and documents
(``v2/document``: upload, status, result, for the files /translate/document takes). The key goes in
``Authorization: DeepL-Auth-Key <MT_API_KEY>``; errors are ``{"message": ...}``. Behind it is the server's own
/translate path: the same model choice, limits, batching and metrics.

``tag_handling: xml`` with ``ignore_tags``, ``splitting_tags``, ``non_splitting_tags`` and ``outline_detection`` is
core/markup.py's ``parse_xml`` (the tag lists work with ``html`` too), so tools that wrap their placeholders in XML
for DeepL (Weblate sends ``<x id="7"></x>`` with ``ignore_tags: ["x"]``) get them back in place.

What DeepL offers and a plain translation model cannot is refused with a 400 that says so rather than ignored:
``formality`` other than ``default``/``prefer_*``, style rules and translation memories. ``context`` and
``model_type`` are accepted and do nothing (the text is translated as it would be without them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, ValidationError

from core.documents import KINDS
from inference.glossary import MAX_TERMS
from service.deps import Service, ServiceState
from service.detection import language_name
from service.document_store import DocumentStore
from service.errors import CLIENT_ERRORS, ApiError, as_api_error
from service.glossary_store import Dictionary, GlossaryStore, StoredGlossary, StoreError, parse_entries
from service.keys import Client, KeyRefused
from service.recent import Recent
from service.routes import translate as native
from service.routes.params import BadBody, ShapedError, read_params, request_body
from service.schemas import TranslateRequest

log = logging.getLogger(__name__)

router = APIRouter(prefix="/deepl/v2", tags=["DeepL-compatible"])

REGIONS = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT")}
"""The target codes DeepL's clients send for these languages (its client refuses a bare "EN" or "PT")."""
QUOTA_EXCEEDED = 456
"""DeepL's status for a spent character quota (its clients raise QuotaExceededException)."""
NO_LIMIT = 1_000_000_000_000
"""``character_limit`` in v2/usage: the figure DeepL reports for an account without a limit."""
KEPT_DOCUMENTS = 64
"""Documents kept for status and result, newest last; older ones are forgotten."""
STATUS_WAIT_S = 1.0
"""A status request waits this long for a document being translated (DeepL's clients ask again every 5 s)."""
HEARTBEAT_S = 10.0
"""With MT_DOCUMENT_DIR, a replica translating a document writes its state again this often, so that the others can
tell it still works on it."""
STALE_S = 60.0
"""A document another replica queued or is translating whose state has not been written for this long: that replica
stopped (it was killed, or its machine went) and the document will not be done; its status says so."""
TAG_LISTS = ("ignore_tags", "splitting_tags", "non_splitting_tags")
"""Fields naming elements: a list, or names separated by commas."""
UNSUPPORTED = {
    "style_id": "style rules",
    "translation_memory_id": "translation memories",
    "custom_instructions": "custom instructions",
}


class DeepLErrorBody(BaseModel):
    message: str = Field(examples=["Value for 'target_lang' not supported."])


class DeepLTranslation(BaseModel):
    detected_source_language: str = Field(examples=["EN"])
    text: str
    billed_characters: int | None = Field(None, description="With show_billed_characters.")


class DeepLTranslations(BaseModel):
    translations: list[DeepLTranslation]


class DeepLLanguage(BaseModel):
    language: str = Field(examples=["DE"])
    name: str = Field(examples=["German"])
    supports_formality: bool | None = Field(None, description="Target languages only: always false here.")


class DeepLUsage(BaseModel):
    character_count: int = Field(description="Characters translated through this API since the server started.")
    character_limit: int = Field(description=f"{NO_LIMIT}: no limit.")


class DeepLGlossary(BaseModel):
    glossary_id: str
    name: str
    ready: bool
    source_lang: str = Field(examples=["en"])
    target_lang: str = Field(examples=["de"])
    creation_time: str = Field(examples=["2026-11-29T13:00:00.000Z"])
    entry_count: int


class DeepLGlossaries(BaseModel):
    glossaries: list[DeepLGlossary]


class DeepLPair(BaseModel):
    source_lang: str
    target_lang: str


class DeepLPairs(BaseModel):
    supported_languages: list[DeepLPair]


class DeepLDictionary(BaseModel):
    source_lang: str = Field(examples=["en"])
    target_lang: str = Field(examples=["de"])
    entry_count: int


class DeepLGlossaryV3(BaseModel):
    glossary_id: str
    name: str
    dictionaries: list[DeepLDictionary]
    creation_time: str = Field(examples=["2026-11-29T13:00:00.000Z"])


class DeepLGlossariesV3(BaseModel):
    glossaries: list[DeepLGlossaryV3]


class DeepLDictionaryEntries(BaseModel):
    source_lang: str
    target_lang: str
    entries: str = Field(description="source<TAB>target lines.")
    entries_format: str = Field(examples=["tsv"])


class DeepLEntriesV3(BaseModel):
    dictionaries: list[DeepLDictionaryEntries]


class DeepLDocumentHandle(BaseModel):
    document_id: str
    document_key: str


class DeepLDocumentStatus(BaseModel):
    document_id: str
    status: str = Field(description="queued, translating, done or error.")
    seconds_remaining: int | None = None
    billed_characters: int | None = Field(None, description="Once done.")
    error_message: str | None = Field(None, description="With status error.")


class DeepLError(ShapedError):
    """An error in DeepL's shape: ``{"message": ...}`` with its status."""


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers of a route; one that checks the key (403) may also answer a key's limits (429, 456)."""
    limits = (429, QUOTA_EXCEEDED) if 403 in codes else ()
    return {code: {"model": DeepLErrorBody, "description": "DeepL's error shape."} for code in (*codes, *limits)}


_TEXTS = {
    "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}],
    "description": "Texts (form-encoded: text repeated).",
}
_SOURCE = {"type": "string", "description": "EN, DE, ...; detected when absent.", "example": "EN"}
_TARGET = {"type": "string", "description": "DE, EN-GB, EN-US, ...", "example": "DE"}
_BOOLEAN = {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["0", "1", "true", "false"]}]}
_TAG_NAMES = {
    "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}],
    "description": "Element names, a list or comma-separated.",
}
_GLOSSARY_ID = {"type": "string", "description": "A glossary of v2/glossaries (needs source_lang)."}
_TRANSLATE_BODY = request_body(
    {
        "text": _TEXTS,
        "source_lang": _SOURCE,
        "target_lang": _TARGET,
        "tag_handling": {"type": "string", "enum": ["html", "xml"]},
        "outline_detection": {**_BOOLEAN, "description": "xml: read the text's outline from where the text is."},
        **{name: _TAG_NAMES for name in TAG_LISTS},
        "split_sentences": {
            "oneOf": [{"type": "string", "enum": ["0", "1", "nonewlines"]}, {"type": "integer", "enum": [0, 1]}],
            "default": "1",
        },
        "glossary_id": _GLOSSARY_ID,
        "glossary_ids": {
            "oneOf": [{"type": "array", "items": {"type": "string"}, "maxItems": 5}, {"type": "string"}],
            "description": "Up to 5 glossaries, a list or comma-separated.",
        },
        "formality": {"type": "string", "enum": ["default", "prefer_less", "prefer_more"]},
        "show_billed_characters": _BOOLEAN,
        "preserve_formatting": {**_BOOLEAN, "description": "Accepted; whitespace is always kept."},
        "context": {"type": "string", "description": "Accepted, not used."},
    },
    ["text", "target_lang"],
)


def _response(status: int, body: object, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def _error(error: Exception) -> JSONResponse:
    """DeepL's answer to a DeepLError, a StoreError or one of the server's own errors (CLIENT_ERRORS)."""
    if isinstance(error, StoreError):
        return _response(400, {"message": str(error)})
    err = error if isinstance(error, DeepLError) else as_api_error(error)
    # DeepL answers a bad request 400 (this API's validation errors are 422), a wrong key 403, a spent quota 456
    status = {401: 403, 415: 400, 422: 400}.get(err.status, err.status)
    if isinstance(err, ApiError) and err.code == "quota_exceeded":
        status = QUOTA_EXCEEDED
    return _response(status, {"message": err.message}, err.headers)


async def _params(request: Request) -> dict[str, Any]:
    try:
        params = await read_params(request, frozenset({"text", *TAG_LISTS, *UNSUPPORTED}))
    except BadBody as err:
        raise DeepLError(400, str(err)) from None
    empty = next((name for name, value in params.items() if value is None), None)
    if empty is not None:  # a field is given a value or left out, as DeepL's clients do
        raise DeepLError(400, f"Value for '{empty}' not supported: null")
    return params


def _check_key(service: ServiceState, request: Request, params: dict[str, Any], quota: bool = True) -> Client | None:
    """The request's client (service/keys.py), charged one request; None when the server needs no key. ``quota``
    False: a key whose day is spent is let through (v2/usage reports it)."""
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "deepl-auth-key":
        key = params.get("auth_key") or request.headers.get("x-api-key") or ""  # DeepL's old field, this API's header
    try:
        client = service.keys.admit(key.strip() if isinstance(key, str) else None, quota)
    except KeyRefused as err:
        if err.reason == "missing":
            message = "Authorization failure: send 'Authorization: DeepL-Auth-Key <a key of the server>'"
            raise DeepLError(403, message) from None
        if err.reason == "wrong":
            raise DeepLError(403, "Authorization failure: wrong key") from None
        status = 429 if err.reason == "rate" else QUOTA_EXCEEDED
        raise DeepLError(status, err.message, {"Retry-After": str(err.retry_after or 1)}) from None
    if client is not None:
        request.state.log_fields["api_key"] = client.name
    return client


def _language(params: dict[str, Any], name: str, required: bool) -> str | None:
    """A DeepL language code as the ISO 639-1 code the models are named by: ``EN-US`` -> ``en``."""
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise DeepLError(400, f"Parameter '{name}' not specified.")
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z]{2,3}(-[A-Za-z]{2,4})?", value.strip()):
        raise DeepLError(400, f"Value for '{name}' not supported: {value!r} is not a language code like DE or EN-US")
    return value.strip().split("-")[0].lower()


def _texts(params: dict[str, Any]) -> list[str]:
    texts = params.get("text")
    if isinstance(texts, str):
        texts = [texts]
    if not texts:
        raise DeepLError(400, "Parameter 'text' not specified.")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise DeepLError(400, "Parameter 'text' must be a list of strings.")
    return texts


def _flag(params: dict[str, Any], name: str) -> bool:
    """A boolean field: JSON's true/false, or a form's 1/0/true/false."""
    value = params.get(name)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "true", "false"):
        return value.strip().lower() in ("1", "true")
    raise DeepLError(400, f"Value for '{name}' not supported: send true or false")


def _check_types(params: dict[str, Any]) -> None:
    """The fields accepted without effect must still be what DeepL documents them to be."""
    for name in ("show_billed_characters", "preserve_formatting"):
        _flag(params, name)
    for name in ("context", "model_type"):
        if params.get(name) is not None and not isinstance(params[name], str):
            raise DeepLError(400, f"Value for '{name}' not supported: send a string")


def _format(params: dict[str, Any]) -> str:
    tags = params.get("tag_handling")
    if tags in (None, ""):
        given = next((name for name in TAG_LISTS if params.get(name) not in (None, "", [])), None)
        if given is not None:
            raise DeepLError(400, f"Parameter '{given}' needs tag_handling html or xml.")
        return "text"
    if tags in ("html", "xml"):
        return str(tags)
    raise DeepLError(400, f"Value for 'tag_handling' not supported: {tags!r}; use html or xml")


def _tag_names(params: dict[str, Any], name: str) -> list[str] | None:
    """``ignore_tags`` and the like: a list of names, or one string of names separated by commas (or both)."""
    value = params.get(name)
    if value in (None, "", []):
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DeepLError(400, f"Value for '{name}' not supported: send element names, a list or comma-separated")
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _split(params: dict[str, Any]) -> bool:
    value = params.get("split_sentences", "1")
    if isinstance(value, bool) or str(value).strip().lower() not in ("0", "1", "nonewlines"):
        raise DeepLError(400, "Value for 'split_sentences' not supported: use 0, 1 or nonewlines")
    return str(value).strip() != "0"


def _refuse_the_unsupported(params: dict[str, Any]) -> None:
    _check_types(params)
    formality = params.get("formality")
    if formality not in (None, "", "default", "prefer_less", "prefer_more"):
        raise DeepLError(
            400,
            f"'formality' {formality!r} is not supported for this target language: the model has no formality "
            "control (use default, prefer_less or prefer_more)",
        )
    for name, what in UNSUPPORTED.items():
        if params.get(name) not in (None, "", []):
            raise DeepLError(400, f"Parameter '{name}' is not supported by this server ({what}).")


def _request(
    texts: list[str], source: str, target: str, params: dict[str, Any], terms: dict[str, str] | None
) -> TranslateRequest:
    try:
        return TranslateRequest(
            text=texts,
            source_lang=source,
            target_lang=target,
            format=_format(params),  # type: ignore[arg-type]
            ignore_tags=_tag_names(params, "ignore_tags"),
            splitting_tags=_tag_names(params, "splitting_tags"),
            non_splitting_tags=_tag_names(params, "non_splitting_tags"),
            outline_detection=_flag(params, "outline_detection") if "outline_detection" in params else True,
            split_sentences=_split(params),
            glossary=terms,
        )
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "request"  # this API's field names are DeepL's
        raise DeepLError(400, f"Invalid value for '{field}': {first['msg']}") from None


@router.post(
    "/translate",
    summary="DeepL: translate text",
    response_class=JSONResponse,
    responses={200: {"model": DeepLTranslations}, **_errors(400, 403, 404, 413, 500, 503, 504)},
    openapi_extra=_TRANSLATE_BODY,
)
async def translate(request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        client = _check_key(service, request, params)
        texts = _texts(params)
        target = _language(params, "target_lang", required=True)
        source = _language(params, "source_lang", required=False)
        _refuse_the_unsupported(params)
        terms = _glossary_terms(_state(request).glossaries, params, source, target)
        body = _request(texts, source or "auto", target or "", params, terms)
        done = await native.translate_texts(service, body, request.state.log_fields, client=client)
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    detected = (done.detected.language if done.detected else source) or done.model.source_language
    _state(request).count(sum(len(t) for t in texts))
    billed = _flag(params, "show_billed_characters")
    translations = []
    for source_text, out in zip(texts, done.texts, strict=True):
        translation: dict[str, Any] = {"detected_source_language": detected.upper(), "text": out.text}
        if billed:
            translation["billed_characters"] = len(source_text)
        translations.append(translation)
    return _response(200, {"translations": translations})


_LANGUAGES: dict[str, Any] = {
    "summary": "DeepL: the languages served",
    "response_class": JSONResponse,
    "responses": {200: {"model": list[DeepLLanguage]}, **_errors(400, 403)},
    "openapi_extra": {
        "parameters": [
            {
                "name": "type",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "enum": ["source", "target"]},
            }
        ]
    },
}


@router.get("/languages", operation_id="deepl_languages", **_LANGUAGES)
@router.post("/languages", operation_id="deepl_languages_post", **_LANGUAGES)
async def languages(request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        kind = params.get("type", "source")
        if kind not in ("source", "target"):
            raise DeepLError(400, "Value for 'type' not supported: use source or target")
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    codes = sorted({getattr(pair, kind) for pair in service.models.pairs()})
    if kind == "source":
        return _response(200, [{"language": code.upper(), "name": language_name(code)} for code in codes])
    body = []
    for code in codes:
        for variant in REGIONS.get(code, (code.upper(),)):
            name = language_name(code) + (f" ({variant.split('-')[1]})" if "-" in variant else "")
            body.append({"language": variant, "name": name, "supports_formality": False})
    return _response(200, body)


_USAGE: dict[str, Any] = {
    "summary": "DeepL: characters translated",
    "response_class": JSONResponse,
    "responses": {200: {"model": DeepLUsage}, **_errors(400, 403)},
}


@router.get("/usage", operation_id="deepl_usage", **_USAGE)
@router.post("/usage", operation_id="deepl_usage_post", **_USAGE)
async def usage(request: Request, service: Service) -> Response:
    try:
        client = _check_key(service, request, await _params(request), quota=False)
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    if client is None or client.characters_per_day is None:
        return _response(200, {"character_count": _state(request).characters, "character_limit": NO_LIMIT})
    used = service.keys.used_today(client)  # a key with a daily limit: today's characters (UTC) and the limit
    return _response(200, {"character_count": used, "character_limit": client.characters_per_day})


# -- glossaries ---------------------------------------------------------------------------------------------


def _glossary(request: Request, glossary_id: str) -> StoredGlossary:
    glossary = _state(request).glossaries.get(glossary_id)
    if glossary is None:
        raise DeepLError(404, f"Glossary not found: {glossary_id!r}")
    return glossary


def _one_pair(glossary: StoredGlossary) -> Dictionary:
    """The v2 API's view of a glossary: its only dictionary."""
    if len(glossary.dictionaries) != 1:
        raise DeepLError(
            400, f"The glossary {glossary.glossary_id!r} has {len(glossary.dictionaries)} dictionaries: use /v3/."
        )
    return glossary.dictionaries[0]


def _dictionary(service: ServiceState, fields: Any) -> Dictionary:
    """A dictionary of a request: ``source_lang``, ``target_lang`` (a pair served), ``entries`` and
    ``entries_format`` (tsv, csv)."""
    if not isinstance(fields, dict):
        raise DeepLError(400, "A dictionary is an object with source_lang, target_lang and entries.")
    source = _language(fields, "source_lang", required=True)
    target = _language(fields, "target_lang", required=True)
    if (source, target) not in {(pair.source, pair.target) for pair in service.models.pairs()}:
        raise DeepLError(400, f"Unsupported glossary language pair: no model translates {source}->{target}.")
    text, entries_format = fields.get("entries"), fields.get("entries_format", "tsv")
    if not isinstance(text, str):
        raise DeepLError(400, "Parameter 'entries' not specified.")
    if not isinstance(entries_format, str):
        raise DeepLError(400, "Value for 'entries_format' not supported: use tsv or csv")
    return Dictionary(source or "", target or "", parse_entries(text, entries_format))


def _glossary_terms(
    store: GlossaryStore, params: dict[str, Any], source: str | None, target: str | None
) -> dict[str, str] | None:
    """The entries of the request's glossary_id (or of its glossary_ids, in order, a later one winning)."""
    ids = params.get("glossary_ids", [])
    if isinstance(ids, str):
        ids = [part.strip() for part in ids.split(",") if part.strip()]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(ids) > 5:
        raise DeepLError(400, "Value for 'glossary_ids' not supported: up to 5 glossary ids")
    one = params.get("glossary_id", "")
    if not isinstance(one, str):
        raise DeepLError(400, "Value for 'glossary_id' not supported: send a glossary's id")
    if one:
        if ids:
            raise DeepLError(400, "Send 'glossary_id' or 'glossary_ids', not both.")
        ids = [one]
    if not ids:
        return None
    if source is None:
        raise DeepLError(400, "Use of a glossary requires the 'source_lang' parameter to be set.")
    terms: dict[str, str] = {}
    for glossary_id in ids:
        glossary = store.get(glossary_id)
        if glossary is None:
            raise DeepLError(404, f"Glossary not found: {glossary_id!r}")
        dictionary = glossary.dictionary(source, target or "")
        if dictionary is None:
            pairs = ", ".join(f"{d.source_lang}->{d.target_lang}" for d in glossary.dictionaries)
            raise DeepLError(
                400, f"The glossary {glossary_id!r} has no dictionary for {source}->{target} (it has {pairs})."
            )
        terms.update(dictionary.entries)
    if len(terms) > MAX_TERMS:
        raise DeepLError(400, f"The glossaries hold {len(terms)} entries together; the limit is {MAX_TERMS}.")
    return terms


@router.get(
    "/glossary-language-pairs",
    summary="DeepL: the language pairs a glossary can be made for",
    response_class=JSONResponse,
    responses={200: {"model": DeepLPairs}, **_errors(400, 403)},
)
async def glossary_pairs(request: Request, service: Service) -> Response:
    try:
        _check_key(service, request, await _params(request))
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    pairs = sorted({(pair.source, pair.target) for pair in service.models.pairs()})
    return _response(200, {"supported_languages": [{"source_lang": s, "target_lang": t} for s, t in pairs]})


@router.post(
    "/glossaries",
    summary="DeepL: create a glossary",
    status_code=201,
    response_class=JSONResponse,
    responses={201: {"model": DeepLGlossary}, **_errors(400, 403)},
    openapi_extra=request_body(
        {
            "name": {"type": "string"},
            "source_lang": _SOURCE,
            "target_lang": _TARGET,
            "entries": {"type": "string", "description": "source<TAB>target lines (tsv) or CSV rows."},
            "entries_format": {"type": "string", "enum": ["tsv", "csv"], "default": "tsv"},
        },
        ["name", "source_lang", "target_lang", "entries"],
    ),
)
async def create_glossary(request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        name = params.get("name")
        if not isinstance(name, str) or not name.strip():
            raise DeepLError(400, "Parameter 'name' not specified.")
        glossary = StoredGlossary.new(name.strip(), [_dictionary(service, params)])
        await asyncio.to_thread(_state(request).glossaries.add, glossary)
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return _response(201, glossary.v2_info())


@router.get(
    "/glossaries",
    summary="DeepL: the glossaries",
    response_class=JSONResponse,
    responses={200: {"model": DeepLGlossaries}, **_errors(400, 403)},
)
async def list_glossaries(request: Request, service: Service) -> Response:
    try:
        _check_key(service, request, await _params(request))
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    listed = [g.v2_info() for g in _state(request).glossaries.all()]  # the v3 API lists the others too
    return _response(200, {"glossaries": [info for info in listed if info is not None]})


@router.get(
    "/glossaries/{glossary_id}",
    summary="DeepL: a glossary",
    response_class=JSONResponse,
    responses={200: {"model": DeepLGlossary}, **_errors(400, 403, 404)},
)
async def get_glossary(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        _check_key(service, request, await _params(request))
        glossary = _glossary(request, glossary_id)
        _one_pair(glossary)
        return _response(200, glossary.v2_info())
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)


@router.get(
    "/glossaries/{glossary_id}/entries",
    summary="DeepL: a glossary's entries, as tsv",
    response_class=Response,
    responses={
        200: {"content": {"text/tab-separated-values": {}}, "description": "The entries."},
        **_errors(400, 403, 404),
    },
)
async def glossary_entries(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        _check_key(service, request, await _params(request))
        dictionary = _one_pair(_glossary(request, glossary_id))
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return Response(dictionary.tsv(), media_type="text/tab-separated-values; charset=utf-8")


@router.delete(
    "/glossaries/{glossary_id}",
    summary="DeepL: delete a glossary",
    status_code=204,
    response_class=Response,
    responses={204: {"description": "Deleted."}, **_errors(400, 403, 404)},
)
async def delete_glossary(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        _check_key(service, request, await _params(request))
        if not await asyncio.to_thread(_state(request).glossaries.remove, glossary_id):
            raise DeepLError(404, f"Glossary not found: {glossary_id!r}")
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return Response(status_code=204)


# -- glossaries, v3: several language pairs in one glossary --------------------------------------------------

router_v3 = APIRouter(prefix="/deepl/v3", tags=["DeepL-compatible"])

_DICTIONARY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "source_lang": _SOURCE,
        "target_lang": _TARGET,
        "entries": {"type": "string", "description": "source<TAB>target lines (tsv) or CSV rows."},
        "entries_format": {"type": "string", "enum": ["tsv", "csv"], "default": "tsv"},
    },
    "required": ["source_lang", "target_lang", "entries"],
}
_PAIR_QUERY = {
    "parameters": [
        {"name": name, "in": "query", "required": True, "schema": {"type": "string"}}
        for name in ("source_lang", "target_lang")
    ]
}


def _json_only(body: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": body, "required": required}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _dictionaries(service: ServiceState, params: dict[str, Any], required: bool) -> list[Dictionary]:
    given = params.get("dictionaries")
    if given is None and not required:
        return []
    if not isinstance(given, list) or not given:
        raise DeepLError(400, "Parameter 'dictionaries' not specified: a list of {source_lang, target_lang, entries}.")
    return [_dictionary(service, fields) for fields in given]


def _name(params: dict[str, Any], required: bool) -> str | None:
    name = params.get("name")
    if name is None and not required:
        return None
    if not isinstance(name, str) or not name.strip():
        raise DeepLError(400, "Parameter 'name' not specified.")
    return name.strip()


def _pair(params: dict[str, Any]) -> tuple[str, str]:
    return _language(params, "source_lang", required=True) or "", _language(params, "target_lang", required=True) or ""


async def _store(request: Request, glossary: StoredGlossary) -> None:
    if not await asyncio.to_thread(_state(request).glossaries.replace, glossary):
        raise DeepLError(404, f"Glossary not found: {glossary.glossary_id!r}")


@router_v3.post(
    "/glossaries",
    summary="DeepL v3: create a glossary of one or more language pairs",
    status_code=201,
    response_class=JSONResponse,
    responses={201: {"model": DeepLGlossaryV3}, **_errors(400, 403)},
    openapi_extra=_json_only(
        {"name": {"type": "string"}, "dictionaries": {"type": "array", "items": _DICTIONARY}}, ["name", "dictionaries"]
    ),
)
async def create_glossary_v3(request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        glossary = StoredGlossary.new(_name(params, True) or "", _dictionaries(service, params, True))
        await asyncio.to_thread(_state(request).glossaries.add, glossary)
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return _response(201, glossary.v3_info())


@router_v3.get(
    "/glossaries",
    summary="DeepL v3: the glossaries",
    response_class=JSONResponse,
    responses={200: {"model": DeepLGlossariesV3}, **_errors(400, 403)},
)
async def list_glossaries_v3(request: Request, service: Service) -> Response:
    try:
        _check_key(service, request, await _params(request))
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return _response(200, {"glossaries": [g.v3_info() for g in _state(request).glossaries.all()]})


@router_v3.get(
    "/glossaries/{glossary_id}",
    summary="DeepL v3: a glossary",
    response_class=JSONResponse,
    responses={200: {"model": DeepLGlossaryV3}, **_errors(400, 403, 404)},
)
async def get_glossary_v3(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        _check_key(service, request, await _params(request))
        return _response(200, _glossary(request, glossary_id).v3_info())
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)


@router_v3.patch(
    "/glossaries/{glossary_id}",
    summary="DeepL v3: rename a glossary, or add entries to its dictionaries (new ones for new pairs)",
    response_class=JSONResponse,
    responses={200: {"model": DeepLGlossaryV3}, **_errors(400, 403, 404)},
    openapi_extra=_json_only({"name": {"type": "string"}, "dictionaries": {"type": "array", "items": _DICTIONARY}}, []),
)
async def update_glossary_v3(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        glossary = _glossary(request, glossary_id)
        name, updates = _name(params, False), _dictionaries(service, params, False)
        if name is None and not updates:
            raise DeepLError(400, "Send a new 'name', 'dictionaries' to merge, or both.")
        merged = {(d.source_lang, d.target_lang): d for d in glossary.dictionaries}
        for update in updates:
            old = merged.get((update.source_lang, update.target_lang))
            entries = {**old.entries, **update.entries} if old else update.entries
            merged[(update.source_lang, update.target_lang)] = Dictionary(
                update.source_lang, update.target_lang, entries
            )
        changed = glossary.with_dictionaries(list(merged.values()))
        if name is not None:
            changed = dataclasses.replace(changed, name=name)
        await _store(request, changed)
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return _response(200, changed.v3_info())


@router_v3.get(
    "/glossaries/{glossary_id}/entries",
    summary="DeepL v3: the entries of a glossary's dictionary",
    response_class=JSONResponse,
    responses={200: {"model": DeepLEntriesV3}, **_errors(400, 403, 404)},
    openapi_extra=_PAIR_QUERY,
)
async def glossary_entries_v3(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        source, target = _pair(params)
        dictionary = _glossary(request, glossary_id).dictionary(source, target)
        if dictionary is None:
            raise DeepLError(404, f"The glossary {glossary_id!r} has no dictionary for {source}->{target}.")
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    entries = {"source_lang": source, "target_lang": target, "entries": dictionary.tsv(), "entries_format": "tsv"}
    return _response(200, {"dictionaries": [entries]})


@router_v3.put(
    "/glossaries/{glossary_id}/dictionaries",
    summary="DeepL v3: replace (or add) the dictionary of a language pair",
    response_class=JSONResponse,
    responses={200: {"model": DeepLDictionary}, **_errors(400, 403, 404)},
    openapi_extra=_json_only(_DICTIONARY["properties"], _DICTIONARY["required"]),
)
async def replace_dictionary_v3(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        glossary = _glossary(request, glossary_id)
        new = _dictionary(service, params)
        others = [
            d for d in glossary.dictionaries if (d.source_lang, d.target_lang) != (new.source_lang, new.target_lang)
        ]
        await _store(request, glossary.with_dictionaries([*others, new]))
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return _response(200, new.info())


@router_v3.delete(
    "/glossaries/{glossary_id}/dictionaries",
    summary="DeepL v3: delete the dictionary of a language pair",
    status_code=204,
    response_class=Response,
    responses={204: {"description": "Deleted."}, **_errors(400, 403, 404)},
    openapi_extra=_PAIR_QUERY,
)
async def delete_dictionary_v3(glossary_id: str, request: Request, service: Service) -> Response:
    try:
        params = await _params(request)
        _check_key(service, request, params)
        source, target = _pair(params)
        glossary = _glossary(request, glossary_id)
        kept = [d for d in glossary.dictionaries if (d.source_lang, d.target_lang) != (source, target)]
        if len(kept) == len(glossary.dictionaries):
            raise DeepLError(404, f"The glossary {glossary_id!r} has no dictionary for {source}->{target}.")
        if not kept:
            raise DeepLError(400, "That is the glossary's last dictionary: delete the glossary instead.")
        await _store(request, glossary.with_dictionaries(kept))
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    return Response(status_code=204)


@router_v3.delete(
    "/glossaries/{glossary_id}",
    summary="DeepL v3: delete a glossary",
    status_code=204,
    response_class=Response,
    responses={204: {"description": "Deleted."}, **_errors(400, 403, 404)},
)
async def delete_glossary_v3(glossary_id: str, request: Request, service: Service) -> Response:
    return await delete_glossary(glossary_id, request, service)


# -- documents ----------------------------------------------------------------------------------------------


@dataclass
class _Job:
    """A document being translated in the background, and then its result."""

    key: str
    name: str
    status: str = "queued"
    characters: int = 0
    result: bytes = b""
    media_type: str = "application/octet-stream"
    error: str | None = None
    written: float | None = None
    """When its state was last written to MT_DOCUMENT_DIR (seconds since the epoch; None in a state written by a
    server before the heartbeat, which is then never taken for stale)."""
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def state(self) -> dict[str, Any]:
        """What another replica needs to answer for the job (the result is kept apart)."""
        keys = ("key", "name", "status", "characters", "media_type", "error", "written")
        return {k: getattr(self, k) for k in keys}

    def abandoned(self, now: float) -> bool:
        """Read from MT_DOCUMENT_DIR, not yet done, and its replica has not written it for ``STALE_S``."""
        return self.status in ("queued", "translating") and self.written is not None and now - self.written > STALE_S


@router.post(
    "/document",
    summary="DeepL: upload a document to translate",
    response_class=JSONResponse,
    responses={200: {"model": DeepLDocumentHandle}, **_errors(400, 403, 413, 503)},
    openapi_extra=request_body(
        {
            "file": {"type": "string", "format": "binary"},
            "source_lang": _SOURCE,
            "target_lang": _TARGET,
            "glossary_id": _GLOSSARY_ID,
            "output_format": {"type": "string", "description": "Only the input's own."},
        },
        ["file", "target_lang"],
        multipart=True,
    ),
)
async def upload_document(request: Request, service: Service) -> Response:
    try:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "multipart/form-data":
            raise DeepLError(400, "Send the document as multipart/form-data with a 'file' field.")
        params = await _params(request)
        client = _check_key(service, request, params)
        upload = params.get("file")
        if upload is None or isinstance(upload, str) or not upload.filename:
            raise DeepLError(400, "Parameter 'file' not specified.")
        name = PurePath(upload.filename).name
        suffix = PurePath(name).suffix.lower()
        if suffix not in KINDS:
            raise DeepLError(400, f"Invalid file type {suffix or name!r}: this server translates {', '.join(KINDS)}")
        output = str(params.get("output_format") or suffix.lstrip(".")).lower().lstrip(".")
        if f".{output}" != suffix:
            raise DeepLError(400, f"Value for 'output_format' not supported: {output!r} (documents keep their type)")
        target = _language(params, "target_lang", required=True)
        source = _language(params, "source_lang", required=False)
        _refuse_the_unsupported(params)
        if source is not None:
            service.models.pick(None, source, target)  # a pair no model serves is refused now, not at the status
        terms = _glossary_terms(_state(request).glossaries, params, source, target)
        options: dict[str, Any] = {"source_lang": source or "auto", "target_lang": target, "glossary": terms}
        data = await upload.read()
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    document_id = uuid.uuid4().hex.upper()
    job = _Job(key=secrets.token_hex(32).upper(), name=name)
    state = _state(request)
    state.jobs.put(document_id, job)
    await _keep(state, document_id, job)
    job.task = asyncio.create_task(_translate_document(service, state, document_id, job, data, options, client))
    return _response(200, {"document_id": document_id, "document_key": job.key})


async def _translate_document(
    service: ServiceState,
    state: DeepLState,
    document_id: str,
    job: _Job,
    data: bytes,
    options: dict[str, Any],
    client: Client | None,
) -> None:
    job.status = "translating"
    await _keep(state, document_id, job)  # other replicas say "translating" too
    beat = asyncio.create_task(_heartbeat(state, document_id, job)) if state.documents.directory else None
    fields: dict[str, Any] = {}
    try:
        job.result, job.media_type = await native.translate_file(
            service, job.name, data, options, fields, client=client
        )
        job.characters = int(fields.get("chars", 0))
        state.count(job.characters)
        job.status = "done"
    except ApiError as err:
        job.status, job.error = "error", err.message
    except Exception as err:  # the job's status says what went wrong; nothing is raised into the event loop
        job.status, job.error = "error", f"the document could not be translated: {err}"
    finally:
        if beat is not None:
            beat.cancel()
    await _keep(state, document_id, job)


async def _heartbeat(state: DeepLState, document_id: str, job: _Job) -> None:
    """The job's state written again every ``HEARTBEAT_S`` while it is translated: replicas that read it see it is
    alive (``_Job.abandoned``)."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        await _keep(state, document_id, job)


async def _keep(state: DeepLState, document_id: str, job: _Job) -> None:
    try:
        await asyncio.to_thread(state.keep, document_id, job)
    except OSError:  # MT_DOCUMENT_DIR failed: this replica still answers for the job from memory
        log.exception("document %s could not be written to MT_DOCUMENT_DIR", document_id)


async def _job(request: Request, service: ServiceState, document_id: str) -> _Job:
    params = await _params(request)
    _check_key(service, request, params)
    job = _state(request).find(document_id)
    if job is None:
        raise DeepLError(404, f"Document not found: {document_id!r} (the last {KEPT_DOCUMENTS} documents are kept)")
    key = params.get("document_key")
    if not isinstance(key, str) or not secrets.compare_digest(key.encode(), job.key.encode()):
        raise DeepLError(403, "Invalid 'document_key' for this document.")
    return job


@router.post(
    "/document/{document_id}",
    summary="DeepL: a document's status",
    response_class=JSONResponse,
    responses={200: {"model": DeepLDocumentStatus}, **_errors(400, 403, 404)},
    openapi_extra=request_body({"document_key": {"type": "string"}}, ["document_key"]),
)
async def document_status(document_id: str, request: Request, service: Service) -> Response:
    try:
        job = await _job(request, service, document_id)
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    if job.task is not None and not job.task.done():  # a short document is done by then: no 5 s poll for it
        await asyncio.wait({job.task}, timeout=STATUS_WAIT_S)
    body: dict[str, Any] = {"document_id": document_id, "status": job.status}
    if job.status == "done":
        body["billed_characters"] = job.characters
    elif job.status == "error":
        body["error_message"] = job.error
    return _response(200, body)


@router.post(
    "/document/{document_id}/result",
    summary="DeepL: a translated document",
    response_class=Response,
    responses={
        200: {"content": {"application/octet-stream": {}}, "description": "The file."},
        **_errors(400, 403, 404, 503),
    },
    openapi_extra=request_body({"document_key": {"type": "string"}}, ["document_key"]),
)
async def document_result(document_id: str, request: Request, service: Service) -> Response:
    try:
        job = await _job(request, service, document_id)
        if job.status == "error":
            raise DeepLError(400, f"The document was not translated: {job.error}")
        if job.status != "done":
            raise DeepLError(503, "Document not ready: ask for its status until it is done.")
    except (DeepLError, StoreError, *CLIENT_ERRORS) as err:
        return _error(err)
    quoted = _quote(job.name)
    return Response(
        job.result, media_type=job.media_type, headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quoted}"}
    )


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


# -- the API's state ------------------------------------------------------------------------------------------


class DeepLState:
    """What the DeepL API keeps: glossaries, documents, and the characters translated (v2/usage)."""

    def __init__(self, glossary_dir: Path | None, documents: DocumentStore | None = None):
        self.glossaries = GlossaryStore(glossary_dir)
        self.characters = 0
        self.jobs = Recent[_Job](KEPT_DOCUMENTS)
        """The documents this process translates or translated: their tasks, to wait on."""
        self.documents = documents or DocumentStore(None, 2 * KEPT_DOCUMENTS)
        """Every document's state and result, where other replicas sharing MT_DOCUMENT_DIR see them."""
        self._lock = threading.Lock()
        self._writing = threading.Lock()

    def keep(self, document_id: str, job: _Job) -> None:
        """The job's state as it is now, for whichever replica is asked (its result with it once done). One write
        at a time, the state read under the lock: a heartbeat's write that ran late cannot put back "translating"
        over "done"."""
        with self._writing:
            job.written = time.time()
            if job.status == "done":
                self.documents.put(f"{document_id}.result", job.result)
            self.documents.put(f"{document_id}.json", json.dumps(job.state()).encode())

    def find(self, document_id: str) -> _Job | None:
        """This process's job, or one another replica keeps in MT_DOCUMENT_DIR."""
        job = self.jobs.get(document_id)
        if job is not None:
            return job
        state = self.documents.get(f"{document_id}.json")
        if state is None:
            return None
        try:
            job = _Job(**json.loads(state))
        except (ValueError, TypeError):  # not a state this server wrote: as if it were not there
            log.warning("document %s: its state in MT_DOCUMENT_DIR cannot be read", document_id)
            return None
        if job.status == "done":
            job.result = self.documents.get(f"{document_id}.result") or b""
        elif job.abandoned(now := time.time()):
            job.status = "error"
            job.error = (
                "the server translating the document stopped before it was done (its state in MT_DOCUMENT_DIR was "
                f"last written {now - (job.written or now):.0f} s ago): upload the document again"
            )
        return job

    def count(self, characters: int) -> None:
        with self._lock:
            self.characters += characters


def _state(request: Request) -> DeepLState:
    state: DeepLState = request.app.state.deepl
    return state


def glossaries(request: Request) -> GlossaryStore:
    """The server's glossaries (DeepL's, which Amazon's terminologies and Google's v3 glossaries are too)."""
    return _state(request).glossaries
