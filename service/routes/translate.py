"""POST /translate: split, tokenize, queue for batching, join the translations back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Request, Response

from core.sentences import Split, split_sentences, whole_text
from core.translation import Translation
from service.batcher import RequestTimeout, TooManySentences
from service.deps import ApiKey, Service
from service.errors import ApiError
from service.loader import LoadedModel, model_ref
from service.results import Wanted, text_translation
from service.schemas import ErrorResponse, TranslateRequest, TranslateResponse

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
async def translate(body: TranslateRequest, request: Request, service: Service, _: ApiKey) -> Response:
    settings = service.settings
    started = time.monotonic()
    texts = body.texts()
    fields = request.state.log_fields  # the request's access log line; sizes even if it fails
    fields.update(texts=len(texts), chars=sum(len(t) for t in texts), beam_size=body.beam_size)
    _check_limits(texts, settings.max_texts, settings.max_chars)
    source = None if body.source_lang == "auto" else body.source_lang
    slot = service.models.pick(body.model, source, body.target_lang)
    model = service.models.current(slot)  # this request stays on this model, whatever reloads happen meanwhile
    fields["model"] = f"{model.name} {model.version}"
    # a full queue refuses at once, before the sentence splitting and tokenization it would waste
    service.batcher.check_room(sum(1 for t in texts if t.strip()))
    splits, ids = await asyncio.to_thread(_prepare, model, texts, body.split_sentences, settings.max_queue)
    flat = [sentence for text_ids in ids for sentence in text_ids]
    fields.update(sentences=len(flat), input_tokens=sum(len(s) for s in flat))
    if body.return_attention:
        _check_attention(flat, model.engine.max_source_pieces, settings.max_attention_pieces)
    timeout = max(0.001, settings.request_timeout_s - (time.monotonic() - started))
    try:
        translations = await service.batcher.translate(
            model.engine, flat, body.options(settings.no_repeat_ngram_size, settings.length_penalty), timeout
        )
    except RequestTimeout:
        raise RequestTimeout(settings.request_timeout_s) from None
    wanted = Wanted(scores=body.return_scores, attention=body.return_attention, n_best=body.n_best)
    payload, outputs = await asyncio.to_thread(_respond, model, splits, translations, wanted)
    fields["output_tokens"] = sum(len(t.best.token_ids) for t in translations if t.hypotheses)
    truncated = sum(t.truncated_source for t in translations)
    if truncated:
        fields["truncated_sentences"] = truncated
    if settings.debug:
        fields.update(source=texts, translation=outputs)
    return Response(payload, media_type="application/json")


def _check_limits(texts: list[str], max_texts: int, max_chars: int) -> None:
    if len(texts) > max_texts:
        raise ApiError(
            413,
            "too_large",
            f"the request has {len(texts)} texts; the limit is {max_texts} (MT_MAX_TEXTS): "
            "send them in several requests",
        )
    for i, text in enumerate(texts):
        if len(text) > max_chars:
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
    model: LoadedModel, texts: list[str], split: bool, max_sentences: int
) -> tuple[list[Split], list[list[list[int]]]]:
    """Sentences of every text and their source ids (pysbd, sentencepiece: off the event loop).

    Stops splitting as soon as the request has more sentences than the queue can ever hold.
    """
    language = model.source_language
    splits: list[Split] = []
    count = 0
    for text in texts:
        splits.append(split_sentences(text, language) if split else whole_text(text))
        count += len(splits[-1].sentences)
        if count > max_sentences:
            raise TooManySentences(count, max_sentences, at_least=True)
    return splits, [[model.engine.tokenize(s) for s in sp.sentences] for sp in splits]


def _respond(
    model: LoadedModel, splits: list[Split], translations: list[Translation], wanted: Wanted
) -> tuple[bytes, list[str]]:
    out, start = [], 0
    for split in splits:
        n = len(split.sentences)
        out.append(text_translation(split, translations[start : start + n], wanted))
        start += n
    response = TranslateResponse(translations=out, model=model_ref(model))
    return response.model_dump_json(exclude_none=True).encode(), [t.text for t in out]
