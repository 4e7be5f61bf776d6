"""Amazon Translate's API (2017-07-01, AWS JSON 1.1) under /aws: clients written for it work with this server by
changing the endpoint (boto3: ``boto3.client("translate", endpoint_url="http://HOST:8000/aws",
aws_access_key_id=KEY, aws_secret_access_key="-", region_name="us-east-1")``).

One path, ``POST /aws``, the operation named by the ``X-Amz-Target`` header as AWS's SDKs send it
(``AWSShineFrontendService_20170701.TranslateText``): ``TranslateText`` (``SourceLanguageCode`` ``auto`` detects
it; ``TerminologyNames``), ``TranslateDocument`` (plain text, HTML and Word documents, base64 in the JSON as the
SDKs send blobs), ``ListLanguages``, and custom terminologies: ``ImportTerminology`` (CSV, TSV or TMX; ``UNI`` or
``MULTI``), ``GetTerminology`` (its file at a URL of this server, as AWS hands out a link to S3),
``ListTerminologies``, ``DeleteTerminology``. Errors are AWS's ``{"__type": "UnsupportedLanguagePairException",
"Message": ...}`` with AWS's statuses.

The key: AWS signs each request with a secret the server never sees, and this server keeps only digests of its
keys (service/keys.py), so the signature is not checked: the key is the *access key id* (``Credential=KEY/...`` in
the ``Authorization`` header, or this server's ``X-API-Key``), and the secret may be anything. A terminology is one
of the server's glossaries (the store DeepL's API keeps, MT_GLOSSARY_DIR), named as AWS names them: one dictionary
a language pair. Refused with a message that says so: ``Settings`` (formality, profanity masking, brevity: a plain
model has none), encryption keys, batch jobs and parallel data.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import csv
import functools
import hashlib
import hmac
import io
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from core.office import xml_parser
from inference.glossary import MAX_TERMS
from service.deps import Service, ServiceState
from service.detection import language_name
from service.errors import CLIENT_ERRORS, ApiError, as_api_error
from service.glossary_store import Dictionary, GlossaryStore, StoredGlossary, StoreError
from service.keys import Client, KeyRefused
from service.routes import translate as native
from service.routes.deepl import glossaries
from service.schemas import TranslateRequest

router = APIRouter(prefix="/aws", tags=["Amazon-compatible"])

TARGET_PREFIX = "AWSShineFrontendService_20170701."
"""What AWS's SDKs put before the operation's name in ``X-Amz-Target``."""
JSON_TYPE = "application/x-amz-json-1.1"
NAME = re.compile(r"^([A-Za-z0-9-]_?)+$")
"""A terminology's name, as AWS's model constrains it."""
DOCUMENT_KINDS = {
    "text/plain": "document.txt",
    "text/html": "document.html",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "document.docx",
}
"""TranslateDocument's content types (AWS's three), as the file name the server's document reader goes by."""
MAX_DOCUMENT_BYTES = 100 * 1024
"""AWS's own bound on TranslateDocument's content (DocumentContent: 102,400 bytes)."""
MAX_RESULTS = 500
LINK_SECONDS = 30 * 60
"""How long GetTerminology's link to the file is good for (AWS's links to S3: 30 minutes)."""
_PROCESS_SECRET = secrets.token_bytes(32)
"""What signs those links without MT_GLOSSARY_DIR: this process's own (its terminologies are its own too)."""
LINK_SECRET_FILE = ".link-secret"
"""With MT_GLOSSARY_DIR, the links' secret lives there, so that every replica sharing the directory (and so the
terminologies) takes the links the others gave."""


class AwsError(Exception):
    """An error in AWS's shape: its ``__type``, status and message (and the fields some types carry)."""

    def __init__(self, kind: str, status: int, message: str, **fields: str):
        super().__init__(message)
        self.kind, self.status, self.message, self.fields = kind, status, message, fields


def _limit(message: str) -> AwsError:
    return AwsError("LimitExceededException", 400, message)


def _invalid(message: str) -> AwsError:
    return AwsError("InvalidRequestException", 400, message)


def _parameter(message: str) -> AwsError:
    return AwsError("InvalidParameterValueException", 400, message)


KINDS = {
    "unsupported_language_pair": ("UnsupportedLanguagePairException", 400),
    "unknown_model": ("InvalidRequestException", 400),
    "too_large": ("TextSizeLimitExceededException", 400),
    "validation": ("InvalidRequestException", 400),
    "unsupported_format": ("InvalidRequestException", 400),
    "rate_limited": ("TooManyRequestsException", 429),
    "quota_exceeded": ("LimitExceededException", 400),
    "overloaded": ("ServiceUnavailableException", 503),
    "not_ready": ("ServiceUnavailableException", 503),
    "shutting_down": ("ServiceUnavailableException", 503),
    "timeout": ("ServiceUnavailableException", 503),
}
"""AWS's exception type and status for this server's own errors, by their code (else InternalServerException)."""


def _error(err: Exception) -> JSONResponse:
    """AWS's answer to an AwsError or to one of the server's own errors (CLIENT_ERRORS)."""
    if isinstance(err, AwsError):
        kind, status, message, fields, headers = err.kind, err.status, err.message, err.fields, {}
    else:
        known = as_api_error(err)
        kind, status = KINDS.get(known.code, ("InternalServerException", 500))
        message, fields, headers = known.message, {}, known.headers
    body = {"__type": kind, "Message": message, **fields}
    return JSONResponse(body, status_code=status, headers={"x-amzn-ErrorType": kind, **headers}, media_type=JSON_TYPE)


def _key(request: Request) -> str | None:
    """The access key id of an AWS signature (``Credential=KEY/date/region/service/aws4_request``), else this
    server's X-API-Key."""
    authorization = request.headers.get("authorization", "")
    found = re.search(r"Credential=([^/,\s]+)/", authorization)
    return found.group(1) if found else request.headers.get("x-api-key")


def _admit(service: ServiceState, request: Request) -> Client | None:
    try:
        client = service.keys.admit(_key(request))
    except KeyRefused as err:
        if err.reason == "missing":
            raise AwsError("MissingAuthenticationTokenException", 403, "Missing Authentication Token") from None
        if err.reason == "wrong":
            raise AwsError(
                "UnrecognizedClientException",
                400,
                "The security token included in the request is invalid: the access key id must be a key of the server",
            ) from None
        if err.reason == "quota":
            raise _limit(err.message) from None
        raise AwsError("TooManyRequestsException", 429, err.message) from None
    if client is not None:
        request.state.log_fields["api_key"] = client.name
    return client


@dataclass(frozen=True)
class Call:
    """One request: its fields, the server and the client its key names."""

    fields: dict[str, Any]
    service: ServiceState
    client: Client | None
    request: Request


@router.post(
    "",
    operation_id="aws",
    summary="Amazon Translate: the operation named in X-Amz-Target",
    response_class=JSONResponse,
    responses={
        200: {"description": "The operation's answer (AWS JSON 1.1)."},
        **{
            status: {"description": "AWS's error shape: {__type, Message}."}
            for status in (400, 403, 404, 409, 429, 500, 503)
        },
    },
    openapi_extra={
        "parameters": [
            {
                "name": "X-Amz-Target",
                "in": "header",
                "required": True,
                "schema": {"type": "string", "example": TARGET_PREFIX + "TranslateText"},
            }
        ],
        "requestBody": {
            "required": True,
            "content": {JSON_TYPE: {"schema": {"type": "object"}}, "application/json": {"schema": {"type": "object"}}},
        },
    },
)
@router.post("/", include_in_schema=False)
async def aws(request: Request, service: Service) -> Response:
    target = request.headers.get("x-amz-target", "")
    operation = OPERATIONS.get(target.removeprefix(TARGET_PREFIX)) if target.startswith(TARGET_PREFIX) else None
    try:
        if operation is None:
            raise AwsError("UnknownOperationException", 400, f"Unknown operation {target!r}: see GET /docs (Amazon)")
        client = _admit(service, request)
        try:
            fields = json.loads(await request.body() or b"{}")
        except ValueError:
            raise AwsError("SerializationException", 400, "The body is not valid JSON") from None
        if not isinstance(fields, dict):
            raise AwsError("SerializationException", 400, "The body must be a JSON object")
        request.state.log_fields["operation"] = target.removeprefix(TARGET_PREFIX)
        answer = await operation(Call(fields, service, client, request))
    except (AwsError, StoreError, *CLIENT_ERRORS) as err:
        response = _error(_parameter(str(err)) if isinstance(err, StoreError) else err)
    else:
        response = JSONResponse(answer, media_type=JSON_TYPE)
    response.headers["x-amzn-RequestId"] = str(getattr(request.state, "request_id", ""))  # the SDKs' RequestId
    return response


def _string(fields: dict[str, Any], name: str, required: bool = True) -> str | None:
    value = fields.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise _invalid(f"{name} is required and must be a string" if required else f"{name} must be a string")
    return value


def _language(fields: dict[str, Any], name: str) -> str:
    value = _string(fields, name) or ""
    if value == "auto" and name == "SourceLanguageCode":
        return value
    language = value.split("-")[0].lower()
    if not (2 <= len(value) <= 5) or len(language) != 2 or not language.isalpha() or not language.isascii():
        raise _parameter(f"{name} {value!r}: send a language code such as de")
    return language


def _check_settings(fields: dict[str, Any]) -> None:
    settings = fields.get("Settings")
    if settings in (None, {}):
        return
    if not isinstance(settings, dict):
        raise _invalid("Settings must be an object")
    asked = ", ".join(sorted(settings))
    raise _invalid(f"Settings ({asked}) are not served: a plain translation model has no formality, masking or brevity")


def _names(fields: dict[str, Any]) -> list[str]:
    names = fields.get("TerminologyNames", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) > 1:
        raise _invalid("TerminologyNames must be a list of at most one terminology's name")
    return names


async def _source(call: Call, text: str, source: str) -> str:
    """The source language: as given, or detected in ``text`` for ``auto``."""
    if source != "auto":
        return source
    found = await call.service.models.detect(text)
    if not found:
        raise AwsError("DetectedLanguageLowConfidenceException", 400, "No language could be detected in the text")
    call.request.state.log_fields["detected_language"] = found[0].language
    return found[0].language


def _terms(store: GlossaryStore, names: list[str], source: str, target: str) -> tuple[dict[str, str], str | None]:
    """The entries of the named terminology for the pair (none if it has no dictionary for it), and its name."""
    if not names:
        return {}, None
    glossary = store.named(names[0])
    if glossary is None:
        raise AwsError("ResourceNotFoundException", 404, f"The terminology {names[0]!r} does not exist")
    dictionary = glossary.dictionary(source, target)
    return (dict(dictionary.entries), glossary.name) if dictionary else ({}, glossary.name)


def _applied(name: str | None, entries: dict[str, str], text: str) -> list[dict[str, Any]]:
    """AWS's ``AppliedTerminologies``: the terminology's terms found in the text."""
    if name is None:
        return []
    compiled = native.glossary_for(None, tuple(entries.items()))  # the one the translation compiled (cached)
    found = compiled.find(text) if compiled is not None else []
    sources = {source.casefold(): source for source in entries}
    terms = {(sources.get(text[t.start : t.end].casefold(), text[t.start : t.end]), t.target) for t in found}
    return [{"Name": name, "Terms": [{"SourceText": s, "TargetText": t} for s, t in sorted(terms)]}]


async def translate_text(call: Call) -> dict[str, Any]:
    text = _string(call.fields, "Text") or ""
    source = _language(call.fields, "SourceLanguageCode")
    target = _language(call.fields, "TargetLanguageCode")
    _check_settings(call.fields)
    names = _names(call.fields)
    if len(text.encode()) > 10_000:
        raise AwsError("TextSizeLimitExceededException", 400, "Text is longer than 10,000 bytes (AWS's bound)")
    try:
        native.check_limits([text], call.service.settings.max_texts, call.service.settings.max_chars)
    except ApiError as err:
        raise AwsError("TextSizeLimitExceededException", 400, err.message) from None
    source = await _source(call, text, source)
    entries, name = _terms(_store(call), names, source, target)
    answer: dict[str, Any] = {"SourceLanguageCode": source, "TargetLanguageCode": target}
    if source == target:
        return {"TranslatedText": text, **answer}
    body = _request([text], source, target, entries)
    done = await native.translate_texts(call.service, body, call.request.state.log_fields, client=call.client)
    answer = {"TranslatedText": done.texts[0].text, **answer}
    if name is not None:
        answer["AppliedTerminologies"] = _applied(name, entries, text)
    return answer


def _request(texts: list[str], source: str, target: str, entries: dict[str, str]) -> TranslateRequest:
    try:
        return TranslateRequest(text=texts, source_lang=source, target_lang=target, glossary=entries or None)
    except ValidationError as err:
        first = err.errors()[0]
        raise _parameter(f"{'.'.join(map(str, first['loc'])) or 'request'}: {first['msg']}") from None


async def translate_document(call: Call) -> dict[str, Any]:
    document = call.fields.get("Document")
    if not isinstance(document, dict):
        raise _invalid("Document is required: {Content, ContentType}")
    kind = _string(document, "ContentType") or ""
    name = DOCUMENT_KINDS.get(kind.split(";")[0].strip().lower())
    if name is None:
        raise _invalid(f"ContentType {kind!r} is not served: use {', '.join(DOCUMENT_KINDS)}")
    try:
        content = base64.b64decode(_string(document, "Content") or "", validate=True)
    except (binascii.Error, ValueError):
        raise _invalid("Document.Content must be base64") from None
    if len(content) > MAX_DOCUMENT_BYTES:
        raise _limit(f"The document is larger than {MAX_DOCUMENT_BYTES} bytes")
    source = _language(call.fields, "SourceLanguageCode")
    target = _language(call.fields, "TargetLanguageCode")
    _check_settings(call.fields)
    names = _names(call.fields)
    if source == "auto" and names:
        raise _parameter("A terminology with a document needs its SourceLanguageCode: the document's is not known yet")
    entries, terminology = _terms(_store(call), names, source, target)
    options: dict[str, Any] = {"source_lang": source, "target_lang": target, "glossary": entries or None}
    fields = call.request.state.log_fields
    written, _ = await native.translate_file(call.service, name, content, options, fields, client=call.client)
    answer: dict[str, Any] = {
        "TranslatedDocument": {"Content": base64.b64encode(written).decode()},
        "SourceLanguageCode": fields.get("detected_language", source),  # auto: detected on the whole document
        "TargetLanguageCode": target,
    }
    if terminology is not None:
        answer["AppliedTerminologies"] = [{"Name": terminology, "Terms": []}]
    return answer


def _page(fields: dict[str, Any], items: list[Any]) -> tuple[list[Any], str | None]:
    """One page of ``items`` (NextToken: where it starts, MaxResults: how many) and the next page's token."""
    limit = fields.get("MaxResults", 100)
    token = fields.get("NextToken") or "0"
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
        raise _parameter(f"MaxResults must be a whole number from 1 to {MAX_RESULTS}")
    if not isinstance(token, str) or not token.isdigit():
        raise _parameter("NextToken is not one this server gave")
    start = int(token)
    end = start + limit
    return items[start:end], str(end) if end < len(items) else None


async def list_languages(call: Call) -> dict[str, Any]:
    display = call.fields.get("DisplayLanguageCode", "en")
    if display != "en":
        raise AwsError(
            "UnsupportedDisplayLanguageCodeException",
            400,
            f"DisplayLanguageCode {display!r}: the server names languages in English only (en)",
            DisplayLanguageCode=str(display),
        )
    languages = [{"LanguageName": language_name(c), "LanguageCode": c} for c in call.service.models.languages()]
    page, token = _page(call.fields, languages)
    return {"Languages": page, "DisplayLanguageCode": "en", **({"NextToken": token} if token else {})}


def _store(call: Call) -> GlossaryStore:
    return glossaries(call.request)


def _terminology_name(fields: dict[str, Any]) -> str:
    name = _string(fields, "Name") or ""
    if len(name) > 256 or not NAME.match(name):
        raise _parameter(f"Name {name!r}: letters, digits, hyphens and single underscores, at most 256")
    return name


def _rows(data: bytes, data_format: str) -> list[list[str]]:
    """A terminology file's rows, its header (language codes) first."""
    if data_format in ("CSV", "TSV"):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise _parameter("The terminology file must be UTF-8") from None
        rows = list(csv.reader(io.StringIO(text), delimiter="," if data_format == "CSV" else "\t"))
        return [[cell.strip() for cell in row] for row in rows if any(cell.strip() for cell in row)]
    if data_format == "TMX":
        from lxml import etree

        try:
            root = etree.fromstring(data, xml_parser())
        except etree.XMLSyntaxError as err:
            raise _parameter(f"The TMX file is not well-formed XML: {err}") from None
        lang = "{http://www.w3.org/XML/1998/namespace}lang"
        units = [
            {
                str(tuv.get(lang) or tuv.get("lang") or "").lower(): (tuv.findtext("seg") or "").strip()
                for tuv in unit.iter("tuv")
            }
            for unit in root.iter("tu")
        ]
        header = list(dict.fromkeys(code for unit in units for code in unit))
        source = str(root.find("header").get("srclang", "") if root.find("header") is not None else "").lower()
        if source in header:
            header.remove(source)
            header.insert(0, source)
        return [header, *([unit.get(code, "") for code in header] for unit in units)]
    raise _parameter(f"Format {data_format!r}: use CSV, TSV or TMX")


def _dictionaries(rows: list[list[str]], directionality: str) -> list[Dictionary]:
    """One dictionary a language pair: from the first column's language to each other's (``UNI``), or from every
    column's to every other's (``MULTI``)."""
    if len(rows) < 2 or len(rows[0]) < 2:
        raise _parameter("The terminology needs a header of two or more language codes and at least one term")
    header = [code.split("-")[0].lower() for code in rows[0]]
    if any(len(code) != 2 or not code.isalpha() for code in header) or len(set(header)) != len(header):
        raise _parameter(f"The header must be distinct language codes such as en,de (got {','.join(rows[0])})")
    sources = range(len(header)) if directionality == "MULTI" else range(1)
    dictionaries = []
    for s in sources:
        for t in range(len(header)):
            if t == s:
                continue
            entries: dict[str, str] = {}
            for row in rows[1:]:
                if len(row) > max(s, t) and row[s] and row[t]:
                    entries.setdefault(row[s], row[t])
            if len(entries) > MAX_TERMS:
                raise _limit(f"{header[s]}->{header[t]} has {len(entries)} terms; the server uses at most {MAX_TERMS}")
            if entries:
                dictionaries.append(Dictionary(header[s], header[t], entries))
    if not dictionaries:
        raise _parameter("The terminology holds no term with a translation")
    return dictionaries


def _properties(glossary: StoredGlossary) -> dict[str, Any]:
    sources = list(dict.fromkeys(d.source_lang for d in glossary.dictionaries))
    first = [d for d in glossary.dictionaries if d.source_lang == sources[0]]
    return {
        "Name": glossary.name,
        "Arn": f"arn:aws:translate:local:000000000000:terminology/{glossary.name}/LATEST",
        "SourceLanguageCode": sources[0],
        "TargetLanguageCodes": [d.target_lang for d in first],
        "TermCount": sum(len(d.entries) for d in first),
        "SizeBytes": len(_csv(glossary).encode()),
        "Directionality": "MULTI" if len(sources) > 1 else "UNI",
        "Format": "CSV",
        "CreatedAt": _epoch(glossary.creation_time),
        "LastUpdatedAt": _epoch(glossary.creation_time),
    }


def _epoch(iso: str) -> float:
    """AWS JSON's timestamps: seconds since 1970."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _csv(glossary: StoredGlossary) -> str:
    """The terminology as AWS's CSV: the first source language's terms, a column a target language."""
    source = glossary.dictionaries[0].source_lang
    first = [d for d in glossary.dictionaries if d.source_lang == source]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([source, *(d.target_lang for d in first)])
    terms = list(dict.fromkeys(term for d in first for term in d.entries))
    for term in terms:
        writer.writerow([term, *(d.entries.get(term, "") for d in first)])
    return out.getvalue()


async def import_terminology(call: Call) -> dict[str, Any]:
    name = _terminology_name(call.fields)
    if call.fields.get("MergeStrategy") != "OVERWRITE":
        raise _parameter("MergeStrategy must be OVERWRITE (AWS's only one)")
    if call.fields.get("EncryptionKey") is not None:
        raise _parameter("EncryptionKey is not served: the server keeps terminologies in MT_GLOSSARY_DIR as they are")
    data = call.fields.get("TerminologyData")
    if not isinstance(data, dict):
        raise _invalid("TerminologyData is required: {File, Format, Directionality}")
    try:
        raw = base64.b64decode(_string(data, "File") or "", validate=True)
    except (binascii.Error, ValueError):
        raise _invalid("TerminologyData.File must be base64") from None
    directionality = data.get("Directionality", "UNI")
    if directionality not in ("UNI", "MULTI"):
        raise _parameter("Directionality must be UNI or MULTI")
    dictionaries = _dictionaries(_rows(raw, str(data.get("Format"))), directionality)
    store = _store(call)
    existing = await asyncio.to_thread(store.named, name)
    if existing is None:
        glossary = StoredGlossary.new(name, dictionaries)
        await asyncio.to_thread(store.add, glossary)
    else:
        glossary = existing.with_dictionaries(dictionaries)
        await asyncio.to_thread(store.replace, glossary)
    return {"TerminologyProperties": _properties(glossary)}


async def _existing(call: Call) -> StoredGlossary:
    name = _terminology_name(call.fields)
    glossary = await asyncio.to_thread(_store(call).named, name)
    if glossary is None:
        raise AwsError("ResourceNotFoundException", 404, f"The terminology {name!r} does not exist")
    return glossary


async def get_terminology(call: Call) -> dict[str, Any]:
    glossary = await _existing(call)
    data_format = call.fields.get("TerminologyDataFormat", "CSV")
    if data_format != "CSV":
        raise _parameter(f"TerminologyDataFormat {data_format!r}: the server gives terminologies as CSV")
    expires = int(time.time()) + LINK_SECONDS
    link = call.request.url_for("aws_terminology_file", name=glossary.name)
    signature = _signature(_store(call), glossary.name, expires)
    location = str(link.include_query_params(expires=expires, signature=signature))
    return {
        "TerminologyProperties": _properties(glossary),
        "TerminologyDataLocation": {"RepositoryType": "S3", "Location": location},
    }


async def list_terminologies(call: Call) -> dict[str, Any]:
    glossaries = await asyncio.to_thread(_store(call).all)
    listed = [_properties(g) for g in glossaries if NAME.match(g.name)]
    page, token = _page(call.fields, listed)
    return {"TerminologyPropertiesList": page, **({"NextToken": token} if token else {})}


async def delete_terminology(call: Call) -> dict[str, Any]:
    glossary = await _existing(call)
    await asyncio.to_thread(_store(call).remove, glossary.glossary_id)
    return {}


OPERATIONS: dict[str, Callable[[Call], Awaitable[dict[str, Any]]]] = {
    "TranslateText": translate_text,
    "TranslateDocument": translate_document,
    "ListLanguages": list_languages,
    "ImportTerminology": import_terminology,
    "GetTerminology": get_terminology,
    "ListTerminologies": list_terminologies,
    "DeleteTerminology": delete_terminology,
}


@router.get(
    "/terminology/{name}.csv",
    name="aws_terminology_file",
    summary="Amazon Translate: a terminology's file (GetTerminology's TerminologyDataLocation)",
    response_class=Response,
    responses={
        200: {"content": {"text/csv": {}}},
        **{status: {"description": "AWS's error shape: {__type, Message}."} for status in (400, 403, 404, 429)},
    },
)
async def terminology_file(
    name: str, request: Request, service: Service, expires: int = 0, signature: str = ""
) -> Response:
    try:
        signed = expires >= time.time() and hmac.compare_digest(
            signature.encode(), _signature(glossaries(request), name, expires).encode()
        )
        if not signed:  # a link from GetTerminology, or the key
            _admit(service, request)
        glossary = await asyncio.to_thread(glossaries(request).named, name)
        if glossary is None:
            raise AwsError("ResourceNotFoundException", 404, f"The terminology {name!r} does not exist")
    except AwsError as err:
        return _error(err)
    return Response(_csv(glossary), media_type="text/csv; charset=utf-8")


def _signature(store: GlossaryStore, name: str, expires: int) -> str:
    return hmac.new(_link_secret(store.directory), f"{name}\n{expires}".encode(), hashlib.sha256).hexdigest()


@functools.lru_cache(maxsize=4)
def _link_secret(directory: Path | None) -> bytes:
    """The secret that signs terminology links: the glossary directory's (made once, by whichever replica comes
    first), else this process's."""
    if directory is None:
        return _PROCESS_SECRET
    path = directory / LINK_SECRET_FILE
    try:
        with open(path, "x", encoding="ascii") as made:  # exclusive: two replicas starting together make one
            made.write(secrets.token_hex(32))
    except FileExistsError:
        pass
    for _ in range(50):  # the other replica may be between creating the file and writing it
        text = path.read_text(encoding="ascii").strip()
        if len(text) == 64:
            return bytes.fromhex(text)
        time.sleep(0.01)
    raise OSError(f"{path}: not a link secret (64 hex digits); delete it and the server makes another")
