"""POST /translate: split, tokenize, queue for batching, join the translations back; POST /detect."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
import urllib.parse
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from core.documents import KINDS, DocumentError, read_document
from core.markdown import parse_markdown
from core.markup import Document, Links, MarkupError, Tags, parse_html, parse_xml, render
from core.reading import Reading, answer, read
from core.sentences import Split, fit, split_sentences, whole_text
from core.translation import DecodeOptions, Translation
from inference.glossary import Glossary, Term
from inference.glossary import apply as apply_glossary
from service.batcher import QueueFull, RequestTimeout, TooManySentences
from service.deps import ApiKey, KeyOnly, Service, ServiceState
from service.detection import Detection
from service.errors import ApiError, key_refusal
from service.keys import Client, KeyRefused
from service.loader import LoadedModel, model_ref
from service.results import Wanted, text_translation
from service.schemas import (
    DetectedLanguage,
    DetectRequest,
    DetectResponse,
    ErrorResponse,
    TextTranslation,
    TranslateRequest,
    TranslateResponse,
    UsageResponse,
)
from service.schemas import Detection as DetectionResult

router = APIRouter(tags=["translation"])


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error("No model serves the languages asked for; the message lists the pairs served."),
    401: _error("X-API-Key missing (when the server requires one)."),
    403: _error("Wrong X-API-Key."),
    413: _error(
        "Body, number of texts, characters of a text, sentences, or source pieces with return_attention over the limit."
    ),
    404: _error("No model of that name; the message lists the models served."),
    422: _error("Invalid request body; the message says which field and why."),
    429: _error(
        "The API key's requests a minute or characters a day are spent (rate_limited, quota_exceeded); see Retry-After."
    ),
    500: _error("The engine failed on this request's sentences."),
    503: _error("Queue full, model not ready or shutting down; see Retry-After."),
    504: _error("Not translated within the server's request timeout."),
}


@router.post(
    "/translate",
    response_model=TranslateResponse,
    responses=_ERRORS,
    summary="Translate one or more texts",
    description="Texts are split into sentences, batched with other requests' sentences, "
    "translated with beam search and joined back with their original whitespace. One translation "
    "per input text, in order.",
)
async def translate(body: TranslateRequest, request: Request, service: Service, client: ApiKey) -> Response:
    done = await translate_texts(service, body, request.state.log_fields, client=client)
    payload = await asyncio.to_thread(_payload, done)
    return Response(payload, media_type="application/json")


@dataclass(frozen=True)
class Done:
    """A translated request: the model that did it, one result per text, and what detection found."""

    model: LoadedModel
    texts: list[TextTranslation]
    detected: Detection | None


async def translate_texts(
    service: ServiceState,
    body: TranslateRequest,
    fields: dict[str, Any],
    *,
    links: bool = False,
    client: Client | None = None,
    document: bool = False,
) -> Done:
    """What /translate does, for every API shape the server speaks: limits, model choice (detecting the source
    language for "auto"), sentence splitting, batching with other requests, joining the sentences back.
    ``fields`` is the request's access log line; sizes go there even if it fails. ``links``: each result carries
    its word alignment (what documents need to put their markup back). ``client``: whose key the characters count
    against (service/keys.py). ``document``: the texts are a document's paragraphs, which MT_MAX_CHARS does not
    bound (the document's own limits do; a paragraph is split into sentences as any text is)."""
    settings = service.settings
    started = time.monotonic()
    texts = body.texts()
    fields.update(texts=len(texts), chars=sum(len(t) for t in texts), beam_size=body.beam_size)
    check_limits(texts, settings.max_texts, None if document else settings.max_chars)
    charge(service, client, fields["chars"])
    detected = None
    source = body.source_lang
    if source == "auto":
        found = await service.models.detect(" \n".join(texts))
        detected = found[0] if found else None
        source = detected.language if detected else None
        fields["detected_language"] = source
    try:
        slot = service.models.pick(body.model, source, body.target_lang)
    except ApiError as err:
        if detected is None:
            raise
        raise ApiError(err.status, err.code, f"detected {_detected(detected)}: {err}") from None
    model = service.models.current(slot)  # this request stays on this model, whatever reloads happen meanwhile
    fields["model"] = f"{model.name} {model.version}"
    documents = None
    if body.format != "text":
        documents = await asyncio.to_thread(_parse, texts, body.format, body.tags())
        texts = [segment.text for document in documents for segment in document.segments]
    # a full queue refuses at once, before the sentence splitting and tokenization it would waste
    service.batcher.check_room(sum(1 for t in texts if t.strip()))
    splits, readings = await asyncio.to_thread(
        _prepare, model, texts, body.split_sentences, settings.max_queue, settings.part_pieces
    )
    pair = f"{model.source_language}-{model.target_language}"
    terms = await asyncio.to_thread(_terms, service.glossaries.get(pair), body.glossary, readings)
    flat = [reading.ids for reading in readings]
    fields.update(sentences=len(flat), input_tokens=sum(len(s) for s in flat))
    if body.return_attention:
        _check_attention(flat, model.engine.max_source_pieces, settings.max_attention_pieces)
    timeout = max(0.001, settings.request_timeout_s - (time.monotonic() - started))
    options = body.options(settings.no_repeat_ngram_size, settings.length_penalty)
    links = links or documents is not None
    if links or any(terms):  # tags and glossary terms go by the word alignment
        options = dataclasses.replace(options, return_attention=True)
    try:
        translations = await _decode(service, model, flat, options, timeout, fields)
    except RequestTimeout:
        raise RequestTimeout(settings.request_timeout_s) from None
    wanted = Wanted(scores=body.return_scores, attention=body.return_attention or links, n_best=body.n_best)
    if any(terms):
        translations = await asyncio.to_thread(_glossary, model, readings, translations, terms, fields, service)
    outputs = await asyncio.to_thread(_join, splits, readings, translations, wanted)
    if documents is not None:
        outputs = await asyncio.to_thread(_render_html, documents, outputs, body.return_scores)
    fields["output_tokens"] = sum(len(t.best.token_ids) for t in translations if t.hypotheses)
    truncated = sum(t.truncated_source for t in translations)
    if truncated:
        fields["truncated_sentences"] = truncated
    if settings.debug:
        fields.update(source=texts, translation=[t.text for t in outputs])
    service.metrics.texts.labels(model.name).inc(fields["texts"])
    service.metrics.characters.labels(model.name).inc(fields["chars"])
    return Done(model, outputs, detected)


async def _decode(
    service: ServiceState,
    model: LoadedModel,
    sentences: list[list[int]],
    options: DecodeOptions,
    timeout: float,
    fields: dict[str, Any],
) -> list[Translation]:
    """The sentences' translations, through the translation cache when there is one (service/cache.py)."""
    cache = service.cache
    if cache is None:
        return await service.batcher.translate(model.engine, sentences, options, timeout)
    scope = (model.name, model.version, model.loaded_at, str(model.bundle))  # a reload is another model

    keys: list[Hashable] = [(scope, tuple(ids), options) for ids in sentences]
    ids_of = dict(zip(keys, sentences, strict=True))

    async def decode(wanted: list[Hashable], seconds: float) -> list[Translation]:
        return await service.batcher.translate(model.engine, [ids_of[key] for key in wanted], options, seconds)

    looked = await cache.translate(keys, decode, timeout)
    counter = service.metrics.cache_sentences
    counter.labels(model.name, "hit").inc(looked.hits)
    counter.labels(model.name, "miss").inc(looked.decoded)
    service.metrics.cache_bytes.set(cache.bytes)
    if looked.hits:
        fields["cached_sentences"] = looked.hits
    return looked.translations


def _parse(texts: list[str], text_format: str, tags: Tags) -> list[Document]:
    documents = []
    for i, text in enumerate(texts):
        try:
            if text_format == "markdown":
                documents.append(parse_markdown(text))
            else:
                documents.append((parse_xml if text_format == "xml" else parse_html)(text, tags))
        except MarkupError as err:
            raise ApiError(422, "validation", f"text[{i}] cannot be translated as {text_format}: {err}") from None
    return documents


def _render_html(documents: list[Document], outputs: list[TextTranslation], scores: bool) -> list[TextTranslation]:
    """Each document with its segments' translations in place, tags around the aligned words."""
    results, start = [], 0
    for document in documents:
        mine = outputs[start : start + len(document.segments)]
        start += len(document.segments)
        rendered = [render(seg, out.text, _links(out)) for seg, out in zip(document.segments, mine, strict=True)]
        text = TextTranslation(text="".join(p if isinstance(p, str) else rendered[p] for p in document.parts))
        if scores:
            values = [out.score for out in mine if out.score is not None]
            text.score = round(sum(values) / len(values), 4) if values else 0.0
        results.append(text)
    return results


def _links(out: TextTranslation) -> list[tuple[int, int, float]]:
    return [(link.target, link.source, link.weight) for link in out.alignment or []]


@router.post(
    "/translate/document",
    response_class=Response,
    responses={
        200: {
            "content": {kind: {} for kind in sorted({*KINDS.values(), "application/octet-stream"})},
            "description": "The translated file, same name and type.",
        },
        **{k: v for k, v in _ERRORS.items() if k != 422},
        415: _error(f"Not a kind of file this server translates ({', '.join(sorted(KINDS))})."),
        422: _error(
            "The file is not UTF-8, not a valid catalog, its markup nests too deep, an office file or e-book is "
            "not a package of its kind, or a PDF is damaged or locked with a password."
        ),
    },
    summary="Translate a document: text, markup, catalogs, XLIFF, app strings, subtitles, office files, e-books, PDF",
    description="Multipart form: `file`, and optionally `source_lang` (or `auto`), `target_lang`, `model`, "
    "`glossary` (a JSON object). The file comes back translated with the same name and type: markup kept as "
    "with format html/markdown; a .po catalog's untranslated entries filled and marked fuzzy, placeholders and "
    "accelerators kept; XLIFF's empty targets filled, inline codes kept; .srt and .vtt subtitles with their "
    "timing; app strings (.json, .arb, Android .xml, .strings, .properties) with their placeholders; Word, "
    "PowerPoint, Excel and OpenDocument files (.docx, .pptx, .xlsx, .odt, .odp, .ods) and EPUB e-books "
    "translated in place, their formatting put back on the aligned words; PDF files page by page, each "
    "paragraph's translation drawn where its text was. Up to MT_MAX_DOCUMENT_BYTES.",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "source_lang": {"type": "string"},
                            "target_lang": {"type": "string"},
                            "model": {"type": "string"},
                            "glossary": {
                                "type": "string",
                                "description": "A JSON object of terms and their translations, as /translate's "
                                '"glossary": {"password": "Kennwort"}.',
                            },
                        },
                    }
                }
            },
        }
    },
)
async def translate_document(request: Request, service: Service, client: ApiKey) -> Response:
    fields = request.state.log_fields
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "multipart/form-data":
        raise ApiError(415, "unsupported_format", "send the document as multipart/form-data with a 'file' field")
    try:
        form = await request.form()
    except Exception as err:
        raise ApiError(422, "validation", f"the multipart body cannot be read: {err}") from None
    upload = form.get("file")
    if upload is None or isinstance(upload, str) or not upload.filename:
        raise ApiError(422, "validation", "missing the 'file' field (a file with a name)")
    name = PurePath(upload.filename).name
    options: dict[str, Any] = {
        k: form.get(k) for k in ("source_lang", "target_lang", "model") if isinstance(form.get(k), str)
    }
    glossary = form.get("glossary")
    if isinstance(glossary, str) and glossary.strip():
        try:
            options["glossary"] = json.loads(glossary)
        except json.JSONDecodeError as err:
            raise ApiError(422, "validation", f"glossary: not JSON ({err}); send an object of terms") from None
    data, media_type = await translate_file(service, name, await upload.read(), options, fields, client=client)
    quoted = urllib.parse.quote(name, safe="")
    return Response(
        data, media_type=media_type, headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quoted}"}
    )


async def translate_file(
    service: ServiceState,
    name: str,
    data: bytes,
    options: dict[str, Any],
    fields: dict[str, Any],
    *,
    client: Client | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[bytes, str]:
    """A whole file (core/documents.py) translated: its paragraphs and strings go through ``translate_texts`` in
    groups of MT_MAX_TEXTS (MT_DOCUMENT_GROUPS of them at once), with their word links, and the file is written
    again. Returns it and its media type. ``progress`` is told (segments done, segments) as groups finish."""
    try:
        document = await asyncio.to_thread(read_document, name, data)
    except DocumentError as err:
        unknown = "not a kind" in str(err)
        raise ApiError(415 if unknown else 422, "unsupported_format" if unknown else "validation", str(err)) from None
    except MarkupError as err:
        raise ApiError(422, "validation", f"{name} cannot be translated: {err}") from None
    settings = service.settings
    if len(document.segments) > settings.max_document_segments:
        raise ApiError(
            413,
            "too_large",
            f"{name} has {len(document.segments)} paragraphs and strings to translate; the limit is "
            f"{settings.max_document_segments} (MT_MAX_DOCUMENT_SEGMENTS): split the document",
        )
    fields.update(document=name, segments=len(document.segments), chars=sum(len(s.text) for s in document.segments))
    charge(service, client, fields["chars"])  # the whole document, before any of it is translated
    if options.get("source_lang") == "auto" and document.segments:
        # detected once on the whole of it (its first 10,000 characters): every group goes to the same model
        found = await service.models.detect(" \n".join(s.text for s in document.segments)[:10_000])
        if found:
            options = {**options, "source_lang": found[0].language}
            fields["detected_language"] = found[0].language
    bodies = []
    step = settings.max_texts
    for start in range(0, len(document.segments), step):
        chunk = document.segments[start : start + step]
        try:
            bodies.append(TranslateRequest.model_validate({"text": [s.text for s in chunk], **options}))
        except ValidationError as err:
            raise ApiError(422, "validation", f"{err.errors()[0]['loc'][0]}: {err.errors()[0]['msg']}") from None
    # MT_DOCUMENT_GROUPS groups decode at once, so that the engine's running set is not left to drain at the end
    # of each one; if one fails, the others are cancelled.
    in_flight = asyncio.Semaphore(settings.document_groups)
    finished = [0]

    async def group(body: TranslateRequest) -> Done:
        async with in_flight:
            done = await _translate_group(service, body, fields)
        if progress is not None:
            finished[0] += len(done.texts)
            progress(finished[0], len(document.segments))
        return done

    try:
        async with asyncio.TaskGroup() as tasks:
            running = [tasks.create_task(group(body)) for body in bodies]
    except BaseExceptionGroup as failed:  # the first group's error is the request's (a 503, a 504, ...)
        raise failed.exceptions[0] from None
    results = [task.result() for task in running]
    done: list[tuple[str, Links]] = [(t.text, _links(t)) for result in results for t in result.texts]
    target_lang = results[-1].model.target_language if results else options.get("target_lang")
    try:
        written = await asyncio.to_thread(document.rebuild, done, target_lang)
    except DocumentError as err:  # a file damaged where reading it did not look (a PDF's objects are read lazily)
        raise ApiError(422, "validation", str(err)) from None
    return written, document.media_type


async def _translate_group(service: ServiceState, body: TranslateRequest, fields: dict[str, Any]) -> Done:
    """One group of a document's segments. While the queue is full the group waits its turn (the Retry-After the
    server would answer), up to MT_REQUEST_TIMEOUT_S, rather than losing the groups translated before it."""
    deadline = time.monotonic() + service.settings.request_timeout_s
    while True:
        try:
            return await translate_texts(service, body, dict(fields), links=True, document=True)
        except QueueFull as err:
            if time.monotonic() + err.retry_after > deadline:
                raise
            await asyncio.sleep(err.retry_after)


def charge(service: ServiceState, client: Client | None, characters: int) -> None:
    """Count ``characters`` against the client's daily limit: 429 quota_exceeded where they pass it."""
    try:
        service.keys.charge(client, characters)
    except KeyRefused as err:
        raise key_refusal(err) from None


def _detected(detection: Detection) -> str:
    return f"{detection.language} (confidence {detection.confidence:.2f})"


@router.get(
    "/usage",
    response_model=UsageResponse,
    responses={k: v for k, v in _ERRORS.items() if k in (401, 403, 429)},
    summary="What the API key used today, and its limits",
    description="The key of X-API-Key (docs/service.md#api-keys): its name, the characters it had translated today "
    "(UTC) and its limits; all null on a server without keys. Asking counts as one of the key's requests.",
)
async def usage(service: Service, client: KeyOnly) -> UsageResponse:
    if client is None:
        return UsageResponse()
    return UsageResponse(
        key=client.name,
        characters_today=service.keys.used_today(client),
        characters_per_day=client.characters_per_day,
        requests_per_minute=client.requests_per_minute,
    )


@router.post(
    "/detect",
    response_model=DetectResponse,
    responses={k: v for k, v in _ERRORS.items() if k in (401, 403, 413, 422, 429)},
    summary="Detect the language of one or more texts",
    description="Among the languages this server serves (sources and targets of its models): the most likely "
    "one per text with its confidence, and every candidate. The same detection picks the model for "
    'source_lang "auto".',
)
async def detect(body: DetectRequest, request: Request, service: Service, _: ApiKey) -> DetectResponse:
    texts = [body.text] if isinstance(body.text, str) else body.text
    request.state.log_fields.update(texts=len(texts), chars=sum(len(t) for t in texts))
    check_limits(texts, service.settings.max_texts, service.settings.max_chars)
    out = []
    for text in texts:
        found = await service.models.detect(text)
        candidates = [DetectedLanguage(language=d.language, confidence=d.confidence) for d in found]
        best = candidates[0] if candidates else None
        out.append(
            DetectionResult(
                language=best.language if best else None,
                confidence=best.confidence if best else 0.0,
                candidates=candidates,
            )
        )
    return DetectResponse(detections=out)


def check_limits(texts: list[str], max_texts: int, max_chars: int | None) -> None:
    """A request's count of texts and each text's length within the server's limits, else 413 saying which."""
    if len(texts) > max_texts:
        raise ApiError(
            413,
            "too_large",
            f"the request has {len(texts)} texts; the limit is {max_texts} (MT_MAX_TEXTS): "
            "send them in several requests",
        )
    for i, text in enumerate(texts):
        if max_chars is not None and len(text) > max_chars:
            raise ApiError(
                413,
                "too_large",
                f"text[{i}] has {len(text)} characters; the limit is {max_chars} "
                "(MT_MAX_CHARS): split it into several texts",
            )


def _check_attention(sentences: list[list[int]], max_source_pieces: int, limit: int) -> None:
    """Attention maps grow as source x target pieces: bound the source side of a request."""
    pieces = sum(min(len(ids), max_source_pieces) for ids in sentences)
    if pieces > limit:
        raise ApiError(
            413,
            "too_large",
            f"with return_attention a request may hold at most {limit} source pieces "
            f"(MT_MAX_ATTENTION_PIECES); this one has {pieces}: send shorter texts or "
            "return_attention=false",
        )


def _prepare(
    model: LoadedModel, texts: list[str], split: bool, max_sentences: int, part_pieces: int
) -> tuple[list[Split], list[Reading]]:
    """Sentences of every text and how the model reads each, all texts' in one list (pysbd, sentencepiece: off the
    event loop). A sentence of more than ``part_pieces`` pieces (0: more than the model takes) is translated in parts
    of at most that many (``core.sentences.fit``), never cut off.

    Stops splitting as soon as the request has more sentences than the queue can ever hold.
    """
    language, engine = model.source_language, model.engine
    cap = min(part_pieces, engine.max_source_pieces) if part_pieces else engine.max_source_pieces
    splits: list[Split] = []
    readings: list[Reading] = []
    for text in texts:
        found = split_sentences(text, language) if split else whole_text(text)
        mine = [read(engine, s) for s in found.sentences]
        if any(len(r.ids) > cap for r in mine):
            found = fit(found, lambda s: len(engine.tokenize(s)), cap)
            mine = [read(engine, s) for s in found.sentences]
        splits.append(found)
        readings += mine
        if len(readings) > max_sentences:
            raise TooManySentences(len(readings), max_sentences, at_least=True)
    return splits, readings


def _terms(server: Glossary | None, entries: dict[str, str] | None, readings: list[Reading]) -> list[list[Term]]:
    """Each sentence's glossary terms (the server's for the pair, the request's added over them), found in the text
    the model reads (its literals already placeholders)."""
    glossary = glossary_for(server, tuple(entries.items()) if entries else ())
    if glossary is None:
        return [[] for _ in readings]
    return [glossary.find(reading.protected.text) for reading in readings]


@functools.lru_cache(maxsize=64)
def glossary_for(server: Glossary | None, entries: tuple[tuple[str, str], ...]) -> Glossary | None:
    """The glossary a request gets, compiled once for the clients that send the same one again (compiling a large
    glossary costs far more than searching a sentence with it)."""
    glossary = server.updated(dict(entries)) if server is not None else Glossary(dict(entries)) if entries else None
    return glossary if glossary is not None and len(glossary) else None


def _glossary(
    model: LoadedModel,
    readings: list[Reading],
    translations: list[Translation],
    terms: list[list[Term]],
    fields: dict[str, Any],
    service: ServiceState,
) -> list[Translation]:
    """The translations with their glossary terms in place (inference/glossary.py); what became of the terms goes
    to the access log and the metrics."""
    out, counts = [], {"found": 0, "replaced": 0, "unplaced": 0}
    for reading, translation, found in zip(readings, translations, terms, strict=True):
        translation, outcome = apply_glossary(translation, reading.protected.text, found)
        out.append(translation)
        for key in counts:
            counts[key] += getattr(outcome, key)
    fields.update({f"glossary_{key}": value for key, value in counts.items()})
    counter = service.metrics.glossary_terms
    counter.labels(model.name, "present").inc(counts["found"] - counts["replaced"] - counts["unplaced"])
    counter.labels(model.name, "replaced").inc(counts["replaced"])
    counter.labels(model.name, "unplaced").inc(counts["unplaced"])
    return out


def _join(
    splits: list[Split], readings: list[Reading], translations: list[Translation], wanted: Wanted
) -> list[TextTranslation]:
    """Each text's translation, its sentences answered as they were read (``core.reading``)."""
    answers = [answer(r, t) for r, t in zip(readings, translations, strict=True)]
    out, start = [], 0
    for split in splits:
        n = len(split.sentences)
        out.append(text_translation(split, answers[start : start + n], wanted))
        start += n
    return out


def _payload(done: Done) -> bytes:
    detected = done.detected
    response = TranslateResponse(
        translations=done.texts,
        model=model_ref(done.model),
        detected_language=DetectedLanguage(language=detected.language, confidence=detected.confidence)
        if detected
        else None,
    )
    return response.model_dump_json(exclude_none=True).encode()
