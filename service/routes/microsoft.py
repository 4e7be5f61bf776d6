"""Microsoft Translator's Text API (version 3.0) under /microsoft: clients written for it work with this server by
changing the endpoint (Microsoft's Python client: ``TextTranslationClient(endpoint="http://HOST:8000/microsoft",
credential=AzureKeyCredential(KEY))``; a plain HTTP client: ``POST http://HOST:8000/microsoft/translate?api-version=
3.0&to=de`` where it posted to ``https://api.cognitive.microsofttranslator.com/translate``).

Its field names, response shapes, error codes and status codes, as Microsoft's v3 reference and its Python client
(``azure-ai-translation-text`` 1.x) have them: ``POST /translate`` (``to`` repeated for several targets, ``from``,
detected text by text when absent, ``textType`` ``plain``/``html``, ``category``, ``includeAlignment``,
``includeSentenceLength``, ``suggestedFrom``), ``/detect``, ``/breaksentence`` and ``GET /languages``; the body a
JSON array of ``{"Text": ...}``; the key as ``Ocp-Apim-Subscription-Key`` (or this server's ``X-API-Key``, or
``Subscription-Key`` in the query, or ``Authorization: Bearer <key>``); errors ``{"error": {"code": 400036,
"message": ...}}``. Behind it is the server's own /translate path: the same model choice, limits, batching and
metrics.

How it maps: ``category`` ``general`` (Microsoft's default) is the server's choice by language, another value names
one of the server's models (GET /models); a text already in a target language comes back as it is; the alignment
(``proj``) is the engine's own word alignment, as character ranges, end included; sentence lengths are the
sentences the server translated, each with the whitespace after it, so that they add up to the text. Refused with
a 400 that says so: ``profanityAction`` other than ``NoAction`` (no profanity lists), scripts other than Latin
(``fromScript``/``toScript``), transliteration, and api-versions other than 3.0.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from core.markup import word_spans
from core.sentences import split_sentences
from service.deps import Service, ServiceState
from service.detection import Detection, language_name
from service.errors import CLIENT_ERRORS, ApiError, as_api_error
from service.keys import Client, KeyRefused
from service.routes import translate as native
from service.routes.params import ShapedError, by_language, detect_each, log_groups
from service.schemas import TextTranslation, TranslateRequest

router = APIRouter(prefix="/microsoft", tags=["Microsoft-compatible"])

API_VERSION = "3.0"
GENERAL = "general"
"""``category``: Microsoft's general models; here, the server's choice by language."""
LATIN = "Latn"

NATIVE_NAMES = {
    "ar": "العربية",
    "bg": "Български",
    "ca": "Català",
    "cs": "Čeština",
    "cy": "Cymraeg",
    "da": "Dansk",
    "de": "Deutsch",
    "el": "Ελληνικά",
    "en": "English",
    "es": "Español",
    "et": "Eesti",
    "fa": "فارسی",
    "fi": "Suomi",
    "fr": "Français",
    "ga": "Gaeilge",
    "he": "עברית",
    "hi": "हिन्दी",
    "hr": "Hrvatski",
    "hu": "Magyar",
    "id": "Indonesia",
    "is": "Íslenska",
    "it": "Italiano",
    "ja": "日本語",
    "ko": "한국어",
    "lt": "Lietuvių",
    "lv": "Latviešu",
    "nb": "Norsk Bokmål",
    "nl": "Nederlands",
    "pl": "Polski",
    "pt": "Português",
    "ro": "Română",
    "ru": "Русский",
    "sk": "Slovenčina",
    "sl": "Slovenščina",
    "sv": "Svenska",
    "tr": "Türkçe",
    "uk": "Українська",
    "vi": "Tiếng Việt",
    "zh": "中文",
}
"""What each language calls itself (``nativeName``); a language not here is given its English name."""
RIGHT_TO_LEFT = frozenset({"ar", "fa", "he", "ur"})

CODES = {
    "unsupported_language_pair": (400, 400023),
    "unknown_model": (400, 400079),
    "too_large": (400, 400077),
    "validation": (400, 400000),
    "rate_limited": (429, 429001),
    "quota_exceeded": (403, 403001),
}
"""Microsoft's status and code for this server's own errors, by their code (else the status, and the status x
1000)."""


class MicrosoftError(ShapedError):
    """An error in Microsoft's shape: its HTTP status and Microsoft's six-digit code."""

    def __init__(self, status: int, code: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(status, message, headers)
        self.code = code


def _error(err: Exception) -> JSONResponse:
    """Microsoft's answer to a MicrosoftError or to one of the server's own errors (CLIENT_ERRORS)."""
    if isinstance(err, MicrosoftError):
        status, code, message, headers = err.status, err.code, err.message, err.headers
    else:
        known = as_api_error(err)
        status, code = CODES.get(known.code, (known.status, known.status * 1000))
        message, headers = known.message, known.headers
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"description": "Microsoft's error shape: {error: {code, message}}."} for s in statuses}


def _query(request: Request) -> dict[str, Any]:
    """The query's fields (``to`` every value it repeats, others their last), its api-version checked."""
    query = request.query_params
    params: dict[str, Any] = {key: query.getlist(key)[-1] for key in query if key != "to"}
    params["to"] = [v for value in query.getlist("to") for v in value.split(",") if v.strip()]
    version = params.get("api-version")
    if version != API_VERSION:
        said = "is missing" if version is None else f"{version!r} is not served"
        raise MicrosoftError(400, 400021, f"The API version parameter {said}: send api-version=3.0")
    return params


def _check_key(service: ServiceState, request: Request, params: dict[str, Any]) -> Client | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    key = (
        request.headers.get("ocp-apim-subscription-key")
        or params.get("Subscription-Key")
        or request.headers.get("x-api-key")
        or (token.strip() if scheme.lower() == "bearer" else None)
    )
    try:
        client = service.keys.admit(key or None)
    except KeyRefused as err:
        if err.reason in ("missing", "wrong"):
            raise MicrosoftError(
                401,
                401000,
                "The request is not authorized because credentials are missing or invalid: send a key of the server "
                "as Ocp-Apim-Subscription-Key",
            ) from None
        retry = {"Retry-After": str(err.retry_after or 1)}
        if err.reason == "quota":
            raise MicrosoftError(403, 403001, err.message, retry) from None
        raise MicrosoftError(429, 429001, err.message, retry) from None
    if client is not None:
        request.state.log_fields["api_key"] = client.name
    return client


async def _admitted(request: Request, service: ServiceState) -> tuple[dict[str, Any], list[str], Client | None]:
    """The query's fields, the body's texts and the client (charged one request), or MicrosoftError."""
    params = _query(request)
    client = _check_key(service, request, params)
    texts = await _texts(request)
    try:
        native.check_limits(texts, service.settings.max_texts, service.settings.max_chars)
    except ApiError as err:
        raise MicrosoftError(400, 400072 if len(texts) > service.settings.max_texts else 400050, err.message) from None
    return params, texts, client


async def _texts(request: Request) -> list[str]:
    """The texts of a body ``[{"Text": ...}, ...]`` (names in any case, as Microsoft reads them)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in ("", "application/json"):
        raise MicrosoftError(415, 415000, f"The Content-Type header {kind!r} is not served: send application/json")
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        raise MicrosoftError(400, 400074, "The body of the request is not valid JSON") from None
    if not isinstance(body, list) or not body:
        raise MicrosoftError(400, 400000, 'The body must be a JSON array of objects such as [{"Text": "Hello"}]')
    texts = []
    for i, item in enumerate(body):
        given = [v for k, v in item.items() if str(k).lower() == "text"] if isinstance(item, dict) else []
        if len(given) != 1 or not isinstance(given[0], str):
            raise MicrosoftError(400, 400020, f'Element {i} of the array is not valid: send {{"Text": "..."}}')
        texts.append(given[0])
    return texts


def _language(value: Any, code: int, name: str) -> str | None:
    """ISO 639-1 of a language code (``de``, ``pt-PT``, ``zh-Hans``: the language), None when absent."""
    if value in (None, ""):
        return None
    language = str(value).strip().split("-")[0].lower()
    if len(language) != 2 or not language.isalpha() or not language.isascii():
        raise MicrosoftError(400, code, f"The {name} language {value!r} is not valid: send a code such as de")
    return language


def _flag(params: dict[str, Any], name: str) -> bool:
    value = str(params.get(name, "false")).lower()
    if value not in ("true", "false"):
        raise MicrosoftError(400, 400000, f"{name} must be true or false")
    return value == "true"


def _check_options(params: dict[str, Any]) -> None:
    action = params.get("profanityAction", "NoAction")
    if action != "NoAction":
        raise MicrosoftError(
            400, 400042, f"profanityAction {action!r} is not served: the server has no profanity lists (use NoAction)"
        )
    for name in ("fromScript", "toScript"):
        script = params.get(name)
        if script not in (None, LATIN):
            raise MicrosoftError(
                400, 400018 if name == "fromScript" else 400004, f"{name} {script!r}: only Latn is served"
            )
    if params.get("textType", "plain") not in ("plain", "html"):
        raise MicrosoftError(400, 400071, f"textType {params['textType']!r}: use plain or html")


def _request(texts: list[str], source: str | None, target: str, params: dict[str, Any]) -> TranslateRequest:
    category = params.get("category", GENERAL)
    try:
        return TranslateRequest(
            text=texts,
            source_lang=source or "auto",
            target_lang=target,
            model=None if category in ("", GENERAL) else category,
            format="html" if params.get("textType") == "html" else "text",
        )
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "request"
        code = {"text": 400005, "target_lang": 400036, "source_lang": 400035, "model": 400002}.get(field, 400000)
        raise MicrosoftError(400, code, f"{field}: {first['msg']}") from None


def _partition(starts: list[int], length: int) -> list[int]:
    """Lengths of the pieces that start at ``starts`` (the first at 0) and together make ``length`` characters."""
    if not starts:
        return []
    edges = [0, *starts[1:], length]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


def _sentence_lengths(source: str, out: TextTranslation | None, language: str) -> dict[str, list[int]]:
    """srcSentLen and transSentLen: each sentence with the whitespace after it (``out`` None: the text as it is)."""
    if out is None:
        lengths = _partition([start for start, _ in split_sentences(source, language).spans], len(source))
        return {"srcSentLen": lengths, "transSentLen": lengths}
    if not out.sentences:
        one = [len(source)] if source.strip() else []
        return {"srcSentLen": one, "transSentLen": [len(out.text)] if one else []}
    starts, at = [], 0
    for sentence in out.sentences:
        found = out.text.find(sentence.text, at)
        starts.append(found if found >= 0 else at)
        at = starts[-1] + len(sentence.text)
    return {
        "srcSentLen": _partition([s.source_span[0] for s in out.sentences], len(source)),
        "transSentLen": _partition(starts, len(out.text)),
    }


def _projection(source: str, target: str, links: list[tuple[int, int]]) -> str:
    """Word links (source word, target word) as Microsoft's ``proj``: ``srcStart:srcEnd-tgtStart:tgtEnd`` character
    ranges, ends included, in source order."""
    source_words, target_words = word_spans(source), word_spans(target)
    ranges = sorted(
        (*source_words[s], *target_words[t])
        for s, t in set(links)
        if 0 <= s < len(source_words) and 0 <= t < len(target_words)
    )
    return " ".join(f"{a}:{b - 1}-{c}:{d - 1}" for a, b, c, d in ranges)


_TRANSLATE_PARAMETERS = [
    {"name": "api-version", "in": "query", "required": True, "schema": {"type": "string", "enum": [API_VERSION]}},
    {
        "name": "to",
        "in": "query",
        "required": True,
        "schema": {"type": "array", "items": {"type": "string", "example": "de"}, "minItems": 1},
        "explode": True,
        "description": "Target languages (ISO 639-1), repeated for several.",
    },
    {"name": "from", "in": "query", "schema": {"type": "string"}, "description": "Detected text by text if absent."},
    {"name": "textType", "in": "query", "schema": {"type": "string", "enum": ["plain", "html"], "default": "plain"}},
    {
        "name": "category",
        "in": "query",
        "schema": {"type": "string", "default": GENERAL},
        "description": "general (the server's choice by language) or a model's name.",
    },
    {"name": "profanityAction", "in": "query", "schema": {"type": "string", "enum": ["NoAction"]}},
    {"name": "profanityMarker", "in": "query", "schema": {"type": "string"}},
    {"name": "includeAlignment", "in": "query", "schema": {"type": "boolean", "default": False}},
    {"name": "includeSentenceLength", "in": "query", "schema": {"type": "boolean", "default": False}},
    {"name": "suggestedFrom", "in": "query", "schema": {"type": "string"}},
    {"name": "fromScript", "in": "query", "schema": {"type": "string", "enum": ["Latn"]}},
    {"name": "toScript", "in": "query", "schema": {"type": "string", "enum": ["Latn"]}},
    {"name": "allowFallback", "in": "query", "schema": {"type": "boolean", "default": True}},
]
_VERSION_ONLY = _TRANSLATE_PARAMETERS[:1]


def _body(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {"Text": {"type": "string"}, "text": {"type": "string"}},
        "oneOf": [{"required": ["Text"]}, {"required": ["text"]}],
        "description": "The text, as Text (or text: the name in any case).",
    }
    schema = {"type": "array", "items": item, "minItems": 1}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}, **(extra or {})}


@router.post(
    "/translate",
    operation_id="microsoft_translate",
    summary="Microsoft: translate texts",
    response_class=JSONResponse,
    responses={
        200: {"description": "[{detectedLanguage?, translations: [{text, to, alignment?, sentLen?}]}]"},
        **_errors(400, 401, 403, 409, 415, 429, 500, 503, 504),
    },
    openapi_extra=_body({"parameters": _TRANSLATE_PARAMETERS}),
)
async def translate(request: Request, service: Service) -> Response:
    groups: dict[tuple[str, str], dict[str, Any]] = {}  # each (target, language) group's access log fields
    try:
        params, texts, client = await _admitted(request, service)
        targets = [_language(t, 400036, "target") for t in params["to"]]
        if not targets:
            raise MicrosoftError(400, 400036, "The target language is missing: send to=de (repeat it for several)")
        source = _language(params.get("from"), 400035, "source")
        suggested = _language(params.get("suggestedFrom"), 400035, "suggested source")
        _check_options(params)
        named = _request(texts, source, targets[0] or "", params).model is not None  # every field checked first
        aligned = _flag(params, "includeAlignment") and params.get("textType", "plain") == "plain"
        lengths = _flag(params, "includeSentenceLength") and params.get("textType", "plain") == "plain"
        _flag(params, "allowFallback")
        detections: list[Detection | None] = []
        if source is not None or named:  # a model asked for by name translates every text
            languages = {source or "auto": list(range(len(texts)))}
        else:
            detections = await detect_each(service, texts)
            languages = by_language([d.language if d else None for d in detections], suggested)

        async def group(target: str, language: str, indices: list[int]) -> list[tuple[int, int, dict[str, Any]]]:
            if language == target:  # already in the language asked for: as it is
                done: list[tuple[str, TextTranslation | None]] = [(texts[i], None) for i in indices]
            else:
                body = _request([texts[i] for i in indices], None if language == "auto" else language, target, params)
                fields = groups[(target, language)] = {}
                result = await native.translate_texts(service, body, fields, links=aligned or lengths, client=client)
                if language == "auto" and result.detected is not None:
                    for i in indices:
                        detections_by_index[i] = result.detected
                done = [(out.text, out) for out in result.texts]
            rows = []
            for i, (text, out) in zip(indices, done, strict=True):
                entry: dict[str, Any] = {"text": text, "to": target}
                if aligned:
                    links = [(w, w) for w in range(len(word_spans(text)))] if out is None else _links(out)
                    entry["alignment"] = {"proj": _projection(texts[i], text, links)}
                if lengths:
                    entry["sentLen"] = _sentence_lengths(texts[i], out, target)
                rows.append((i, k_of[target], entry))
            return rows

        detections_by_index: dict[int, Detection] = {}
        k_of = {target: k for k, target in enumerate(dict.fromkeys(t for t in targets if t))}
        answered = await asyncio.gather(
            *(group(t, language, indices) for t in k_of for language, indices in languages.items())
        )
    except (MicrosoftError, *CLIENT_ERRORS) as err:
        return _error(err)
    finally:
        log_groups(request.state.log_fields, groups)
    results: list[dict[str, Any]] = [{"translations": [None] * len(k_of)} for _ in texts]
    for i, k, entry in (row for rows in answered for row in rows):
        results[i]["translations"][k] = entry
    if source is None:
        for i, result in enumerate(results):
            found = detections_by_index.get(i) or (detections[i] if detections else None)
            detected = {"language": found.language, "score": round(found.confidence, 2)} if found else None
            results[i] = {"detectedLanguage": detected or {"language": suggested or "", "score": 0.0}, **result}
    charged = sum(fields.get("chars", 0) for fields in groups.values())
    return JSONResponse(results, headers=_headers(request, {"X-Metered-Usage": str(charged)}))


def _links(out: TextTranslation) -> list[tuple[int, int]]:
    return [(link.source, link.target) for link in out.alignment or []]


def _headers(request: Request, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"X-RequestId": str(getattr(request.state, "request_id", "")), **(extra or {})}


def _detection(found: list[Detection], served: frozenset[str]) -> dict[str, Any]:
    def one(d: Detection) -> dict[str, Any]:
        return {
            "language": d.language,
            "score": round(d.confidence, 2),
            "isTranslationSupported": d.language in served,
            "isTransliterationSupported": False,
        }

    if not found:
        return {"language": "", "score": 0.0, "isTranslationSupported": False, "isTransliterationSupported": False}
    return {**one(found[0]), "alternatives": [one(d) for d in found[1:]]}


@router.post(
    "/detect",
    operation_id="microsoft_detect",
    summary="Microsoft: detect the language of texts",
    response_class=JSONResponse,
    responses={
        200: {"description": "[{language, score, isTranslationSupported, alternatives}]"},
        **_errors(400, 401, 403, 415, 429, 503),
    },
    openapi_extra=_body({"parameters": _VERSION_ONLY}),
)
async def detect(request: Request, service: Service) -> Response:
    try:
        _, texts, _ = await _admitted(request, service)
        found = await asyncio.gather(*(service.models.detect(text) for text in texts))
    except (MicrosoftError, *CLIENT_ERRORS) as err:
        return _error(err)
    served = frozenset(p.source for p in service.models.pairs())
    return JSONResponse([_detection(f, served) for f in found], headers=_headers(request))


@router.post(
    "/breaksentence",
    operation_id="microsoft_breaksentence",
    summary="Microsoft: where each text's sentences end",
    response_class=JSONResponse,
    responses={200: {"description": "[{sentLen, detectedLanguage?}]"}, **_errors(400, 401, 403, 415, 429, 503)},
    openapi_extra=_body(
        {
            "parameters": [
                *_VERSION_ONLY,
                {"name": "language", "in": "query", "schema": {"type": "string"}},
                {"name": "script", "in": "query", "schema": {"type": "string", "enum": ["Latn"]}},
            ]
        }
    ),
)
async def breaksentence(request: Request, service: Service) -> Response:
    try:
        params, texts, _ = await _admitted(request, service)
        language = _language(params.get("language"), 400003, "text's")
        script = params.get("script")
        if script not in (None, LATIN):
            raise MicrosoftError(400, 400073, f"script {script!r}: only Latn is served")
        detections = [None] * len(texts) if language else await detect_each(service, texts)
    except (MicrosoftError, *CLIENT_ERRORS) as err:
        return _error(err)
    results = []
    for text, found in zip(texts, detections, strict=True):
        split = await asyncio.to_thread(split_sentences, text, language or (found.language if found else "en"))
        result: dict[str, Any] = {"sentLen": _partition([start for start, _ in split.spans], len(text))}
        if language is None:
            result["detectedLanguage"] = {
                "language": found.language if found else "",
                "score": round(found.confidence, 2) if found else 0.0,
            }
        results.append(result)
    return JSONResponse(results, headers=_headers(request))


def _named(code: str) -> dict[str, str]:
    return {
        "name": language_name(code),
        "nativeName": NATIVE_NAMES.get(code, language_name(code)),
        "dir": "rtl" if code in RIGHT_TO_LEFT else "ltr",
    }


@router.get(
    "/languages",
    operation_id="microsoft_languages",
    summary="Microsoft: the languages served",
    response_class=JSONResponse,
    responses={200: {"description": "{translation: {code: {name, nativeName, dir}}, ...}"}, **_errors(400)},
    openapi_extra={
        "parameters": [
            *_VERSION_ONLY,
            {
                "name": "scope",
                "in": "query",
                "schema": {"type": "string", "default": "translation,transliteration,dictionary"},
            },
        ]
    },
)
async def languages(request: Request, service: Service) -> Response:
    try:
        params = _query(request)
        scopes = [s.strip() for s in params.get("scope", "translation,transliteration,dictionary").split(",")]
        unknown = [s for s in scopes if s not in ("translation", "transliteration", "dictionary")]
        if unknown:
            raise MicrosoftError(400, 400001, f"scope {unknown[0]!r}: use translation, transliteration, dictionary")
    except MicrosoftError as err:
        return _error(err)
    body: dict[str, Any] = {}
    if "translation" in scopes:
        body["translation"] = {code: _named(code) for code in service.models.languages()}
    if "transliteration" in scopes:
        body["transliteration"] = {}
    if "dictionary" in scopes:
        body["dictionary"] = {}
    return JSONResponse(body, headers=_headers(request))


@router.post(
    "/transliterate",
    operation_id="microsoft_transliterate",
    summary="Microsoft: transliteration (not served)",
    response_class=JSONResponse,
    responses={400: {"description": "Always: no language is transliterated here."}},
    openapi_extra={"parameters": _VERSION_ONLY},
)
async def transliterate() -> Response:
    return _error(MicrosoftError(400, 400080, "Transliteration is not served: the server's languages are in Latin"))
