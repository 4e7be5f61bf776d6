"""Microsoft Translator's Text API under /microsoft: clients written for it work with this server by changing the
endpoint (Microsoft's Python client: ``TextTranslationClient(endpoint="http://HOST:8000/microsoft",
credential=AzureKeyCredential(KEY))``; a plain HTTP client: ``POST http://HOST:8000/microsoft/translate?api-version=
3.0&to=de`` where it posted to ``https://api.cognitive.microsofttranslator.com/translate``).

Its field names, response shapes, error codes and status codes, as Microsoft's v3 reference and its Python client
(``azure-ai-translation-text`` 1.x) have them: ``POST /translate`` (``to`` repeated for several targets, ``from``,
detected text by text when absent, ``textType`` ``plain``/``html``, ``category``, ``includeAlignment``,
``includeSentenceLength``, ``suggestedFrom``), ``/detect``, ``/breaksentence`` and ``GET /languages``; the body a
JSON array of ``{"Text": ...}``; the key as ``Ocp-Apim-Subscription-Key`` (or this server's ``X-API-Key``, or
``Subscription-Key`` in the query, or ``Authorization: Bearer <key>``); errors ``{"error": {"code": 400036,
"message": ...}}``. Also /translate and /languages of the newer version 2026-06-06, which the 2.x client speaks:
``{"inputs": [{"text", "targets": [{"language", "deploymentName"}]}]}``, each text with targets of its own,
``deploymentName`` as ``category``. Behind it is the server's own /translate path: the same model choice, limits,
batching and metrics.

How it maps: ``category`` ``general`` (Microsoft's default) is the server's choice by language, another value names
one of the server's models (GET /models); a text already in a target language comes back as it is; the alignment
(``proj``) is the engine's own word alignment, as character ranges, end included; sentence lengths are the
sentences the server translated, each with the whitespace after it, so that they add up to the text. Refused with
a 400 that says so: ``profanityAction`` other than ``NoAction`` (no profanity lists), scripts other than Latin
(``fromScript``/``toScript``), transliteration, other api-versions, and the newer version's tone, gender and
adaptive translation.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass
from html import unescape
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
from service.routes.params import ShapedError, detect_each, log_groups
from service.schemas import TextTranslation, TranslateRequest

router = APIRouter(prefix="/microsoft", tags=["Microsoft-compatible"])

API_VERSION = "3.0"
NEXT_VERSION = "2026-06-06"
"""The version Microsoft's newer client (``azure-ai-translation-text`` 2.x) speaks: /translate with a body of
``inputs`` each with its own ``targets``, and /languages; its other routes are 3.0's only."""
GENERAL = "general"
"""``category``: Microsoft's general models; here, the server's choice by language."""
LATIN = "Latn"
DYNAMIC_DICTIONARY = re.compile(
    r"<mstrans:dictionary\s+translation\s*=\s*\"([^\"]*)\"\s*>(.*?)</mstrans:dictionary>", re.DOTALL | re.IGNORECASE
)
"""Microsoft's dynamic dictionary markup: a phrase and the translation it must get."""

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


def _query(request: Request, versions: tuple[str, ...] = (API_VERSION,)) -> dict[str, Any]:
    """The query's fields (``to`` every value it repeats, others their last), its api-version one of ``versions``."""
    query = request.query_params
    params: dict[str, Any] = {key: query.getlist(key)[-1] for key in query if key != "to"}
    params["to"] = [v for value in query.getlist("to") for v in value.split(",") if v.strip()]
    version = params.get("api-version")
    if version not in versions:
        said = "is missing" if version is None else f"{version!r} is not served here"
        raise MicrosoftError(400, 400021, f"The API version parameter {said}: send api-version={' or '.join(versions)}")
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


async def _admitted(
    request: Request, service: ServiceState, versions: tuple[str, ...] = (API_VERSION,)
) -> tuple[dict[str, Any], Any, Client | None]:
    """The query's fields, the JSON body and the client (charged one request), or MicrosoftError."""
    params = _query(request, versions)
    client = _check_key(service, request, params)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in ("", "application/json"):
        raise MicrosoftError(415, 415000, f"The Content-Type header {kind!r} is not served: send application/json")
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        raise MicrosoftError(400, 400074, "The body of the request is not valid JSON") from None
    return params, body, client


def _check_limits(service: ServiceState, texts: list[str]) -> None:
    try:
        native.check_limits(texts, service.settings.max_texts, service.settings.max_chars)
    except ApiError as err:
        raise MicrosoftError(400, 400072 if len(texts) > service.settings.max_texts else 400050, err.message) from None


def _texts(body: Any) -> list[str]:
    """The texts of a version 3.0 body, ``[{"Text": ...}, ...]`` (the name in any case, as Microsoft reads it)."""
    if not isinstance(body, list) or not body:
        raise MicrosoftError(400, 400000, 'The body must be a JSON array of objects such as [{"Text": "Hello"}]')
    texts = []
    for i, item in enumerate(body):
        given = [v for k, v in item.items() if str(k).lower() == "text"] if isinstance(item, dict) else []
        if len(given) != 1 or not isinstance(given[0], str):
            raise MicrosoftError(400, 400020, f'Element {i} of the array is not valid: send {{"Text": "..."}}')
        texts.append(given[0])
    return texts


def _inputs(body: Any) -> list[Item]:
    """The items of a body of the newer version: ``{"inputs": [{"text", "language"?, "textType"?, "targets":
    [{"language", "deploymentName"?, ...}]}]}``; what a plain model cannot do is refused."""
    inputs = body.get("inputs") if isinstance(body, dict) else None
    if not isinstance(inputs, list) or not inputs:
        raise MicrosoftError(
            400, 400000, 'The body must be {"inputs": [{"text": "Hello", "targets": [{"language": "de"}]}]}'
        )
    items = []
    for i, item in enumerate(inputs):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise MicrosoftError(400, 400020, f'inputs[{i}] is not valid: send {{"text": "...", "targets": [...]}}')
        _script(item, "script", 400018)
        text_type = item.get("textType", "plain")
        if not isinstance(text_type, str) or text_type.lower() not in ("plain", "html"):
            raise MicrosoftError(400, 400071, f"inputs[{i}].textType {text_type!r}: use plain or html")
        targets = item.get("targets")
        if not isinstance(targets, list) or not targets or not all(isinstance(t, dict) for t in targets):
            raise MicrosoftError(400, 400036, f'inputs[{i}].targets: send a list such as [{{"language": "de"}}]')
        for target in targets:
            _check_target(target, f"inputs[{i}].targets")
        items.append(
            Item.read(
                item["text"],
                _language(item.get("language"), 400035, "source"),
                text_type.lower() == "html",
                tuple(
                    Target(
                        str(_language(t.get("language"), 400036, "target")),
                        _model(t.get("deploymentName"), "deploymentName"),
                    )
                    for t in targets
                ),
            )
        )
    return items


def _check_target(target: dict[str, Any], where: str) -> None:
    if not isinstance(target.get("language"), str) or not target["language"]:
        raise MicrosoftError(400, 400036, f"{where}: each target needs a language such as de")
    _script(target, "script", 400004)
    if target.get("allowFallback") is not None and not isinstance(target["allowFallback"], bool):
        raise MicrosoftError(400, 400000, f"{where}: allowFallback must be true or false")
    if target.get("profanityAction", "NoAction") != "NoAction":
        raise MicrosoftError(400, 400042, f"{where}: profanityAction is not served: the server has no profanity lists")
    for name in ("tone", "gender"):
        if target.get(name, "neutral") != "neutral":
            raise MicrosoftError(400, 400042, f"{where}: {name} {target[name]!r} is not served: a plain model has none")
    for name in ("adaptiveDatasetId", "referenceTextPairs"):
        if target.get(name):
            raise MicrosoftError(400, 400042, f"{where}: {name} is not served: the server's models are not adapted")


def _script(fields: dict[str, Any], name: str, code: int) -> None:
    if fields.get(name) not in (None, LATIN):
        raise MicrosoftError(400, code, f"{name} {fields[name]!r}: only Latn is served")


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
    _script(params, "fromScript", 400018)
    _script(params, "toScript", 400004)
    if params.get("textType", "plain") not in ("plain", "html"):
        raise MicrosoftError(400, 400071, f"textType {params['textType']!r}: use plain or html")


@dataclass(frozen=True)
class Target:
    """A language to translate into, and the model asked for (None: the server's choice)."""

    language: str
    model: str | None = None


@dataclass(frozen=True)
class Item:
    """A text to translate, its language when given, and its targets."""

    text: str
    source: str | None
    html: bool
    targets: tuple[Target, ...]
    terms: tuple[tuple[str, str], ...] = ()
    """The text's dynamic dictionary: phrases and the translations they must get."""

    @classmethod
    def read(cls, raw: str, source: str | None, html: bool, targets: tuple[Target, ...]) -> Item:
        """An item from a text that may mark phrases with Microsoft's dynamic dictionary, ``<mstrans:dictionary
        translation="...">phrase</mstrans:dictionary>``: the markup taken out, each phrase a glossary term of the
        text's request (inference/glossary.py: its translation put where the model's is, if that differs)."""
        terms: dict[str, str] = {}

        def phrase(found: re.Match[str]) -> str:
            terms[found.group(2).strip()] = unescape(found.group(1))
            return found.group(2)

        text = DYNAMIC_DICTIONARY.sub(phrase, raw)
        if terms and source is None:
            raise MicrosoftError(400, 400035, "The dynamic dictionary needs the text's language: send from")
        return cls(text, source, html, targets, tuple(terms.items()))


@dataclass(frozen=True)
class Translated:
    """A text's translation into one target; ``out`` None when the text was already in that language."""

    text: str
    out: TextTranslation | None


def _model(value: Any, name: str) -> str | None:
    """A category or deployment name: ``general`` (or none) is the server's choice, another value a model's name."""
    if value in (None, "", GENERAL):
        return None
    if not isinstance(value, str):
        raise MicrosoftError(400, 400002, f"{name} must be a string: general or a model's name (GET /models)")
    return value


def _request(
    texts: list[str], source: str | None, target: Target, html: bool, terms: tuple[tuple[str, str], ...] = ()
) -> TranslateRequest:
    try:
        return TranslateRequest(
            text=texts,
            source_lang=source or "auto",
            target_lang=target.language,
            model=target.model,
            format="html" if html else "text",
            glossary=dict(terms) or None,
        )
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "request"
        code = {"text": 400005, "target_lang": 400036, "source_lang": 400035, "model": 400002}.get(field, 400000)
        raise MicrosoftError(400, code, f"{field}: {first['msg']}") from None


async def _translate(
    service: ServiceState,
    items: list[Item],
    client: Client | None,
    links: bool,
    suggested: str | None,
    groups: dict[Any, dict[str, Any]],
) -> tuple[list[Detection | None], list[list[Translated]]]:
    """Each item's translation into each of its targets, and the language detected in each (None where it was
    given or nothing was). Texts without a language are detected one by one, as Microsoft does; the texts of one
    language, target, model, kind and dynamic dictionary are translated together (``groups``: each one's access log
    fields)."""
    for item in items:  # every field checked before any detection
        for target in item.targets:
            _request(["-"], item.source, target, item.html, item.terms)
    detected: list[Detection | None] = [None] * len(items)
    unknown = [i for i, item in enumerate(items) if item.source is None and any(not t.model for t in item.targets)]
    for i, detection in zip(unknown, await detect_each(service, [items[i].text for i in unknown]), strict=True):
        detected[i] = detection
    fallback = suggested or next((d.language for d in detected if d is not None), "auto")
    work: dict[tuple[str, Target, bool, tuple[tuple[str, str], ...]], list[tuple[int, int]]] = {}
    results: list[list[Translated]] = [[Translated(item.text, None)] * len(item.targets) for item in items]
    for i, item in enumerate(items):
        language = getattr(detected[i], "language", fallback)
        for k, target in enumerate(item.targets):
            source = item.source or ("auto" if target.model else language)
            if source != target.language:  # a text already in the language asked for stays as it is
                work.setdefault((source, target, item.html, item.terms), []).append((i, k))

    async def group(key: tuple[str, Target, bool, tuple[tuple[str, str], ...]], places: list[tuple[int, int]]) -> None:
        source, target, html, terms = key
        texts = [items[i].text for i, _ in places]
        body = _request(texts, None if source == "auto" else source, target, html, terms)
        fields = groups[key] = {}
        done = await native.translate_texts(service, body, fields, links=links, client=client)
        for (i, k), out in zip(places, done.texts, strict=True):
            results[i][k] = Translated(out.text, out)
            if source == "auto" and items[i].source is None and detected[i] is None:
                detected[i] = done.detected

    await asyncio.gather(*(group(key, places) for key, places in work.items()))
    return detected, results


def _detected(found: Detection | None, suggested: str | None) -> dict[str, Any]:
    if found is None:
        return {"language": suggested or "", "score": 0.0}
    return {"language": found.language, "score": round(found.confidence, 2)}


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


def _version(*versions: str) -> dict[str, Any]:
    return {
        "name": "api-version",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "enum": list(versions)},
    }


_VERSION_ONLY = [_version(API_VERSION)]
_TRANSLATE_PARAMETERS = [
    _version(API_VERSION, NEXT_VERSION),
    {
        "name": "to",
        "in": "query",
        "schema": {"type": "array", "items": {"type": "string", "example": "de"}},
        "explode": True,
        "description": "3.0 (required there): target languages (ISO 639-1), repeated for several.",
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
    {"name": "fromScript", "in": "query", "schema": {"type": "string", "enum": [LATIN]}},
    {"name": "toScript", "in": "query", "schema": {"type": "string", "enum": [LATIN]}},
    {"name": "allowFallback", "in": "query", "schema": {"type": "boolean", "default": True}},
]
_TEXTS = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {"Text": {"type": "string"}, "text": {"type": "string"}},
        "oneOf": [{"required": ["Text"]}, {"required": ["text"]}],
        "description": "The text, as Text (or text: the name in any case).",
    },
    "description": "Version 3.0.",
}
_TARGET = {
    "type": "object",
    "required": ["language"],
    "properties": {
        "language": {"type": "string", "minLength": 1},
        "script": {"type": "string", "enum": [LATIN]},
        "deploymentName": {"type": "string"},
        "allowFallback": {"type": "boolean"},
        "profanityAction": {"type": "string", "enum": ["NoAction"]},
        "tone": {"type": "string", "enum": ["neutral"]},
        "gender": {"type": "string", "enum": ["neutral"]},
    },
}
_INPUTS = {
    "type": "object",
    "required": ["inputs"],
    "description": f"Version {NEXT_VERSION}.",
    "properties": {
        "inputs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["text", "targets"],
                "properties": {
                    "text": {"type": "string"},
                    "language": {"type": "string"},
                    "script": {"type": "string", "enum": [LATIN]},
                    "textType": {"type": "string", "enum": ["plain", "html", "Plain", "Html"]},
                    "targets": {"type": "array", "minItems": 1, "items": _TARGET},
                },
            },
        }
    },
}


def _body(schema: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}, **extra}


@router.post(
    "/translate",
    operation_id="microsoft_translate",
    summary="Microsoft: translate texts",
    response_class=JSONResponse,
    responses={
        200: {"description": "[{detectedLanguage?, translations: [{text, to, alignment?, sentLen?}]}]"},
        **_errors(400, 401, 403, 409, 415, 429, 500, 503, 504),
    },
    openapi_extra=_body({"oneOf": [_TEXTS, _INPUTS]}, {"parameters": _TRANSLATE_PARAMETERS}),
)
async def translate(request: Request, service: Service) -> Response:
    groups: dict[Any, dict[str, Any]] = {}  # each group's access log fields
    try:
        params, body, client = await _admitted(request, service, (API_VERSION, NEXT_VERSION))
        if params["api-version"] == NEXT_VERSION:
            items = _inputs(body)
            _check_limits(service, [item.text for item in items])
            detected, results = await _translate(service, items, client, False, None, groups)
            return JSONResponse(
                {"value": [_next_result(*row) for row in zip(items, detected, results, strict=True)]},
                headers=_headers(request, {"X-Metered-Usage": str(_charged(groups))}),
            )
        texts = _texts(body)
        _check_limits(service, texts)
        model = _model(params.get("category"), "category")
        targets = tuple(dict.fromkeys(Target(str(_language(t, 400036, "target")), model) for t in params["to"]))
        if not targets:
            raise MicrosoftError(400, 400036, "The target language is missing: send to=de (repeat it for several)")
        source = _language(params.get("from"), 400035, "source")
        suggested = _language(params.get("suggestedFrom"), 400035, "suggested source")
        _check_options(params)
        html = params.get("textType", "plain") == "html"
        aligned = _flag(params, "includeAlignment") and not html  # the markup's positions are not the words'
        lengths = _flag(params, "includeSentenceLength") and not html
        _flag(params, "allowFallback")
        items = [Item.read(text, source, html, targets) for text in texts]
        detected, results = await _translate(service, items, client, aligned or lengths, suggested, groups)
    except (MicrosoftError, *CLIENT_ERRORS) as err:
        return _error(err)
    finally:
        log_groups(request.state.log_fields, groups)
    answer: list[dict[str, Any]] = []
    for item, found, translated in zip(items, detected, results, strict=True):
        entries = []
        for target, done in zip(item.targets, translated, strict=True):
            entry: dict[str, Any] = {"text": done.text, "to": target.language}
            if aligned:
                words = range(len(word_spans(done.text)))
                links = [(w, w) for w in words] if done.out is None else _links(done.out)
                entry["alignment"] = {"proj": _projection(item.text, done.text, links)}
            if lengths:
                entry["sentLen"] = _sentence_lengths(item.text, done.out, target.language)
            entries.append(entry)
        answer.append({"detectedLanguage": _detected(found, suggested)} if source is None else {})
        answer[-1]["translations"] = entries
    return JSONResponse(answer, headers=_headers(request, {"X-Metered-Usage": str(_charged(groups))}))


def _charged(groups: dict[Any, dict[str, Any]]) -> int:
    """The characters translated (a text counts once a target it was translated into)."""
    return sum(fields.get("chars", 0) for fields in groups.values())


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
    openapi_extra=_body(_TEXTS, {"parameters": _VERSION_ONLY}),
)
async def detect(request: Request, service: Service) -> Response:
    try:
        _, body, _ = await _admitted(request, service)
        texts = _texts(body)
        _check_limits(service, texts)
        found = await service.models.detect_each(texts)
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
        _TEXTS,
        {
            "parameters": [
                *_VERSION_ONLY,
                {"name": "language", "in": "query", "schema": {"type": "string"}},
                {"name": "script", "in": "query", "schema": {"type": "string", "enum": ["Latn"]}},
            ]
        },
    ),
)
async def breaksentence(request: Request, service: Service) -> Response:
    try:
        params, body, _ = await _admitted(request, service)
        texts = _texts(body)
        _check_limits(service, texts)
        language = _language(params.get("language"), 400003, "text's")
        _script(params, "script", 400073)
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
            _version(API_VERSION, NEXT_VERSION),
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
        params = _query(request, (API_VERSION, NEXT_VERSION))
        newer = params["api-version"] == NEXT_VERSION
        known = (
            ("translation", "transliteration", "models") if newer else ("translation", "transliteration", "dictionary")
        )
        scopes = [s.strip() for s in params.get("scope", ",".join(known)).split(",")]
        unknown = [s for s in scopes if s not in known]
        if unknown:
            raise MicrosoftError(400, 400001, f"scope {unknown[0]!r}: use {', '.join(known)}")
    except MicrosoftError as err:
        return _error(err)
    models = service.models
    named = [(slot.name, pair) for slot in models.slots if (pair := models.pair_of(slot)) is not None]
    body: dict[str, Any] = {}
    if "translation" in scopes:
        body["translation"] = {code: _named(code) for code in service.models.languages()}
        if newer:  # the models that translate from or into each language
            for code, entry in body["translation"].items():
                entry["models"] = sorted({name for name, pair in named if code in (pair.source, pair.target)})
    if "transliteration" in scopes:
        body["transliteration"] = {}
    if "dictionary" in scopes:  # what /dictionary/lookup takes: each source language and its targets
        pairs = models.pairs()
        body["dictionary"] = {
            source: {
                **_named(source),
                "translations": [{**_named(p.target), "code": p.target} for p in pairs if p.source == source],
            }
            for source in dict.fromkeys(p.source for p in pairs)
        }
    if "models" in scopes:
        body["models"] = [GENERAL, *sorted({name for name, _ in named})]
    return JSONResponse(body, headers=_headers(request))


LOOKUP_ALTERNATIVES = 6
"""Translations a dictionary lookup asks the model for (its beam and n-best), and back-translations each."""
TERM_PUNCTUATION = ".,:;!?"
"""What a term's translation may end with that makes it no other entry (the model ends a short text as its training
data ended one)."""
MAX_LOOKUP_TEXTS, MAX_LOOKUP_CHARS = 10, 100
"""Microsoft's bounds on a dictionary lookup: ten terms of a hundred characters."""


def _returns_to(term: str, returned: list[tuple[str, float]]) -> bool:
    """Whether one of a translation's back-translations holds the term (as words, ignoring case): the round trip
    that keeps an alternative in a lookup."""
    pattern = re.compile(rf"(?<!\w){re.escape(term.strip())}(?!\w)", re.IGNORECASE)
    return any(pattern.search(text) for text, _ in returned)


async def _alternatives(
    service: ServiceState, terms: list[str], source: str, target: str, client: Client | None, fields: dict[str, Any]
) -> list[list[tuple[str, float]]]:
    """Each term's distinct translations and their share of the probability of all found (each weighed by the exp
    of its length-normalised log-probability), likeliest first."""
    try:
        body = TranslateRequest(
            text=terms,
            source_lang=source,
            target_lang=target,
            beam_size=LOOKUP_ALTERNATIVES,
            n_best=LOOKUP_ALTERNATIVES,
            return_scores=True,
            split_sentences=False,
        )
    except ValidationError as err:
        raise MicrosoftError(400, 400005, f"A term is not valid: {err.errors()[0]['msg']}") from None
    done = await native.translate_texts(service, body, fields, client=client)
    found = []
    for out in done.texts:
        scored: dict[str, float] = {}
        for text, score in [(out.text, out.score or 0.0), *((a.text, a.score) for a in out.alternatives or [])]:
            key = text.strip().strip(TERM_PUNCTUATION)  # "Datei:" and "Datei." are "Datei"
            if key and key.casefold() not in {k.casefold() for k in scored}:
                scored[key] = math.exp(score)
        total = sum(scored.values()) or 1.0
        found.append([(text, weight / total) for text, weight in scored.items()])
    return found


@router.post(
    "/dictionary/lookup",
    operation_id="microsoft_dictionary_lookup",
    summary="Microsoft: a term's translations, as the model's alternatives, each translated back",
    response_class=JSONResponse,
    responses={
        200: {"description": "[{normalizedSource, displaySource, translations: [{displayTarget, confidence, ...}]}]"},
        **_errors(400, 401, 403, 415, 429, 500, 503, 504),
    },
    openapi_extra=_body(
        _TEXTS,
        {
            "parameters": [
                *_VERSION_ONLY,
                {"name": "from", "in": "query", "required": True, "schema": {"type": "string", "example": "en"}},
                {"name": "to", "in": "query", "required": True, "schema": {"type": "string", "example": "de"}},
            ]
        },
    ),
)
async def dictionary_lookup(request: Request, service: Service) -> Response:
    fields: dict[str, dict[str, Any]] = {"lookup": {}, "back": {}}
    try:
        params, body, client = await _admitted(request, service)
        terms = _texts(body)
        if len(terms) > MAX_LOOKUP_TEXTS or any(len(t) > MAX_LOOKUP_CHARS for t in terms):
            raise MicrosoftError(
                400, 400050, f"A lookup takes at most {MAX_LOOKUP_TEXTS} terms of {MAX_LOOKUP_CHARS} characters"
            )
        source = _language(params.get("from"), 400035, "source")
        target = _language(params["to"][0] if params["to"] else None, 400036, "target")
        if source is None or target is None:
            raise MicrosoftError(400, 400035 if source is None else 400036, "A lookup needs from and to languages")
        found = await _alternatives(service, [t.strip() for t in terms], source, target, client, fields["lookup"])
        served = {(p.source, p.target) for p in service.models.pairs()}
        back: list[list[tuple[str, float]]] = []
        targets = [text for alternatives in found for text, _ in alternatives]
        if (target, source) in served and targets:  # each translation translated back, where a model can
            back = await _alternatives(service, targets, target, source, client, fields["back"])
    except (MicrosoftError, *CLIENT_ERRORS) as err:
        return _error(err)
    finally:
        log_groups(request.state.log_fields, fields)
    answer, k = [], 0
    for term, alternatives in zip(terms, found, strict=True):
        returns = back[k : k + len(alternatives)] if back else [[] for _ in alternatives]
        k += len(alternatives)
        kept = [
            (text, share, returned)
            for (text, share), returned in zip(alternatives, returns, strict=True)
            if not back or _returns_to(term, returned)
        ]
        if not kept and alternatives:  # none comes back to the term: the model's best alone
            kept = [(*alternatives[0], returns[0])]
        total = sum(share for _, share, _ in kept)
        entries = []
        for text, share, returned in kept:
            entries.append(
                {
                    "normalizedTarget": text.casefold(),
                    "displayTarget": text,
                    "posTag": "OTHER",  # the model names no part of speech
                    "confidence": round(share / total, 4),
                    "prefixWord": "",
                    "backTranslations": [
                        {"normalizedText": b.casefold(), "displayText": b, "numExamples": 0, "frequencyCount": 0}
                        for b, _ in returned
                    ],
                }
            )
        answer.append(
            {"normalizedSource": term.strip().casefold(), "displaySource": term.strip(), "translations": entries}
        )
    return JSONResponse(answer, headers=_headers(request))


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


def _next_result(item: Item, found: Detection | None, translated: list[Translated]) -> dict[str, Any]:
    """One item's answer in the newer version's shape."""
    result: dict[str, Any] = {} if item.source else {"detectedLanguage": _detected(found, None)}
    result["translations"] = [
        {"language": target.language, "text": done.text, "sourceCharacters": len(item.text)}
        for target, done in zip(item.targets, translated, strict=True)
    ]
    return result
