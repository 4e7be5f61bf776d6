"""The HTTP API's bodies: what /translate and friends accept and answer (the OpenAPI schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.markup import Tags
from core.translation import DecodeOptions
from inference.glossary import MAX_TERM_CHARS, MAX_TERMS, Glossary

_DEFAULTS = DecodeOptions()


MAX_TAG_NAMES = 100
"""Element names a request's ignore_tags, splitting_tags or non_splitting_tags may give, each."""


class TranslateRequest(BaseModel):
    """Texts to translate and how to decode them."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,  # the schema's types, no coercion: "beam_size": "4" or "split_sentences": 0 get 422
        json_schema_extra={
            "examples": [
                {"text": "Hello world. How are you?"},
                {
                    "text": ["Good morning.", "Thank you!"],
                    "beam_size": 5,
                    "n_best": 2,
                    "return_scores": True,
                },
                {"text": "The cat sat on the mat.", "return_attention": True},
                {"text": "Enter your password to continue.", "glossary": {"password": "Kennwort"}},
            ]
        },
    )

    text: str | list[str] = Field(
        description="One text, or a list of texts; one translation per text comes back, in order.",
        examples=["Hello world. How are you?"],
    )
    beam_size: int = Field(4, ge=1, le=16, description="Beam width; 1 is greedy decoding.")
    n_best: int = Field(
        1,
        ge=1,
        le=16,
        description="Hypotheses to return per text (at most beam_size); extras are alternatives.",
    )
    max_length: int | None = Field(
        None,
        ge=1,
        le=1024,
        description=f"Most target pieces per sentence (default {_DEFAULTS.max_length}).",
    )
    max_length_ratio: float | None = Field(
        None,
        gt=0,
        le=10,
        description="Most target pieces relative to the source: ratio x source pieces + 10 "
        f"(default {_DEFAULTS.max_length_ratio:g}).",
    )
    length_penalty: float | None = Field(
        None,
        ge=0,
        le=5,
        description="Hypotheses are ranked by log-probability / length ** length_penalty; 0 favours short "
        "ones, larger values longer ones (default: the server's MT_LENGTH_PENALTY).",
    )
    no_repeat_ngram_size: int | None = Field(
        None,
        ge=0,
        le=16,
        description="Never repeat a sequence of this many target pieces within one translation, "
        'which stops a weak model looping ("mit einer Matrix mit einer Matrix"); 0 turns it off '
        "(default: the server's MT_NO_REPEAT_NGRAM_SIZE).",
    )
    return_attention: bool = Field(
        False,
        description="Add attention maps and word alignments, for the text and for each sentence.",
    )
    return_scores: bool = Field(False, description="Add the model's score (length-normalised log-probability).")
    source_lang: str | None = Field(
        None,
        pattern=r"^([a-z]{2}|auto)$",
        description="Language of the texts, ISO 639-1 ('en'). With target_lang it picks the model; default: the "
        "server's first model (GET /languages lists the pairs served).",
        examples=["en"],
    )
    target_lang: str | None = Field(
        None,
        pattern=r"^[a-z]{2}$",
        description="Language to translate into, ISO 639-1 ('de').",
        examples=["de"],
    )
    model: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The model to use, by name (GET /models); instead of, or checked against, the languages.",
    )
    format: Literal["text", "html", "xml", "markdown"] = Field(
        "text",
        description="html: texts are HTML; the text is translated without its tags and each inline tag (b, i, a, "
        "span, ...) is put back around the words the engine aligned to the ones it enclosed; attributes, URLs, "
        'code, pre, script, translate="no" and class="notranslate" stay as they are. xml: the same for XML, whose '
        "elements split the text where their parent holds no text of its own and are inline where it does "
        "(outline_detection); empty elements inside a sentence keep their place. markdown: the same for emphasis "
        "and links; link targets, code and URLs stay as they are. One translation per text, without alternatives "
        "or attention.",
    )
    ignore_tags: list[str] | None = Field(
        None,
        max_length=MAX_TAG_NAMES,
        description="html, xml: elements whose content is never translated (copied as it is, in its place).",
        examples=[["x", "keep"]],
    )
    splitting_tags: list[str] | None = Field(
        None, max_length=MAX_TAG_NAMES, description="html, xml: elements that always split the text into parts."
    )
    non_splitting_tags: list[str] | None = Field(
        None,
        max_length=MAX_TAG_NAMES,
        description="html, xml: elements that never split it (inline, their words tagged in the translation).",
    )
    outline_detection: bool = Field(
        True,
        description="xml: read which elements split the text from where the text is; false: only splitting_tags "
        "split, every other element is inline.",
    )
    glossary: dict[str, str] | None = Field(
        None,
        description='Terms and the translations they must get, e.g. {"password": "Kennwort"}: a term is matched '
        "as whole words, ignoring case (the longest where terms overlap). Where the translation lacks a term's "
        "translation, the words the engine aligned to the term are replaced by it, as given (not inflected); a term "
        f"no word is aligned to stays out. At most {MAX_TERMS} entries of at most {MAX_TERM_CHARS} characters.",
        examples=[{"password": "Kennwort"}],
    )
    split_sentences: bool = Field(
        True,
        description="Split texts into sentences (and at line breaks), translate them one by one, "
        "keeping the whitespace between them; false translates each text as one sentence.",
    )

    @field_validator("text")
    @classmethod
    def _texts_not_empty_and_valid_unicode(cls, value: str | list[str]) -> str | list[str]:
        return _check_texts(value)

    @field_validator("glossary")
    @classmethod
    def _glossary_usable(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            Glossary(value)  # GlossaryError (a ValueError) names the entry
        return value

    @model_validator(mode="after")
    def _tags_for_markup(self) -> TranslateRequest:
        given = [n for n in ("ignore_tags", "splitting_tags", "non_splitting_tags") if getattr(self, n)]
        if given and self.format not in ("html", "xml"):
            raise ValueError(f"{given[0]} needs format html or xml (format is {self.format})")
        self.tags()  # a name that is none raises MarkupError, a ValueError
        return self

    def tags(self) -> Tags:
        return Tags.of(
            self.ignore_tags or (), self.splitting_tags or (), self.non_splitting_tags or (), self.outline_detection
        )

    @model_validator(mode="after")
    def _html_gives_one_translation(self) -> TranslateRequest:
        if self.format != "text" and (self.n_best > 1 or self.return_attention):
            raise ValueError(
                f"format {self.format} returns one translation per text: leave n_best at 1 and return_attention off"
            )
        return self

    @model_validator(mode="after")
    def _n_best_within_beam(self) -> TranslateRequest:
        if self.n_best > self.beam_size:
            raise ValueError(
                f"n_best ({self.n_best}) must not exceed beam_size ({self.beam_size}); raise beam_size or lower n_best"
            )
        return self

    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)

    def options(
        self, default_no_repeat_ngram_size: int = 0, default_length_penalty: float = _DEFAULTS.length_penalty
    ) -> DecodeOptions:
        """Decoding options; fields the request left out take the server's defaults given here."""
        no_repeat = self.no_repeat_ngram_size
        return DecodeOptions(
            beam_size=self.beam_size,
            length_penalty=default_length_penalty if self.length_penalty is None else self.length_penalty,
            max_length=self.max_length if self.max_length is not None else _DEFAULTS.max_length,
            max_length_ratio=self.max_length_ratio if self.max_length_ratio is not None else _DEFAULTS.max_length_ratio,
            n_best=self.n_best,
            return_attention=self.return_attention,
            no_repeat_ngram_size=default_no_repeat_ngram_size if no_repeat is None else no_repeat,
        )


def _check_texts(value: str | list[str]) -> str | list[str]:
    """A ``text`` field: at least one text, each valid Unicode (the error names the text and the position)."""
    if isinstance(value, list) and not value:
        raise ValueError("text is an empty list; send at least one text")
    for i, text in enumerate([value] if isinstance(value, str) else value):
        _check_unicode(text, "text" if isinstance(value, str) else f"text[{i}]")
    return value


def _check_unicode(text: str, where: str) -> None:
    """JSON escapes can carry half a surrogate pair ("\\ud800"), which is no character: refuse it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{where} holds an unpaired surrogate {text[err.start]!a} at character {err.start}; "
            "send valid Unicode (a \\uD800-\\uDFFF escape must be half of a pair)"
        ) from None


class Alternative(BaseModel):
    text: str
    score: float = Field(description="Length-normalised log-probability; higher is better.")


class Attention(BaseModel):
    """Cross-attention of the decoder: which source pieces each target piece looked at."""

    source_tokens: list[str] = Field(description="Source sentencepiece pieces (columns).")
    target_tokens: list[str] = Field(description="Target sentencepiece pieces (rows).")
    weights: list[list[float]] = Field(
        description="One row per target token, one column per source token; each row sums to 1 "
        "(for a text of several sentences, rows attend only to their own sentence's columns)."
    )


class WordLink(BaseModel):
    """A target word and a source word it was translated from."""

    target: int = Field(description="Index of the target word.")
    source: int = Field(description="Index of the source word.")
    target_word: str
    source_word: str
    weight: float = Field(
        description="Attention mass between the two words (0..1), weighed up where the bundle's lexicon lists the "
        "target word's pieces among the source word's translations."
    )


class SentenceTranslation(BaseModel):
    """One sentence of a text, when the text was split (present with return_attention)."""

    source: str = Field(description="The source sentence, as cut from the text.")
    source_span: tuple[int, int] = Field(description="Character offsets [start, end) of the sentence in the text.")
    text: str = Field(description="Its translation.")
    score: float | None = Field(None, description="With return_scores.")
    alternatives: list[Alternative] | None = Field(None, description="With n_best > 1: the other hypotheses.")
    attention: Attention | None = None
    alignment: list[WordLink] | None = None
    truncated: bool | None = Field(None, description="True when the sentence was longer than the model accepts.")


class TextTranslation(BaseModel):
    """The translation of one input text."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "text": "Hallo Welt.",
                    "score": -0.21,
                    "attention": {
                        "source_tokens": ["▁Hello", "▁world", "."],
                        "target_tokens": ["▁Hallo", "▁Welt", "."],
                        "weights": [[0.9, 0.05, 0.05], [0.1, 0.85, 0.05], [0.05, 0.05, 0.9]],
                    },
                    "alignment": [
                        {
                            "target": 0,
                            "source": 0,
                            "target_word": "Hallo",
                            "source_word": "Hello",
                            "weight": 0.9,
                        },
                        {
                            "target": 1,
                            "source": 1,
                            "target_word": "Welt.",
                            "source_word": "world.",
                            "weight": 0.93,
                        },
                    ],
                }
            ]
        }
    )

    text: str = Field(description="The translation; sentences joined with the source's own whitespace.")
    score: float | None = Field(
        None,
        description="With return_scores: mean of the sentences' normalised log-probabilities.",
    )
    alternatives: list[Alternative] | None = Field(
        None,
        description="With n_best > 1: other translations, best first (the k-th joins each "
        "sentence's k-th best hypothesis).",
    )
    attention: Attention | None = Field(
        None,
        description="With return_attention: the whole text's map (sentences concatenated, block-diagonal).",
    )
    alignment: list[WordLink] | None = Field(
        None,
        description="With return_attention: word links over the whole text (word indices count across sentences).",
    )
    sentences: list[SentenceTranslation] | None = Field(
        None,
        description="With return_attention: each sentence with its own translation, attention and alignment.",
    )
    truncated: bool | None = Field(
        None,
        description="Present and true when a sentence was longer than the model accepts (cut).",
    )


class ModelRef(BaseModel):
    name: str
    version: str
    source_lang: str | None = Field(None, description="The model's source language (ISO 639-1).")
    target_lang: str | None = Field(None, description="The model's target language (ISO 639-1).")


class TranslateResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "translations": [{"text": "Hallo Welt. Wie geht es dir?"}],
                    "model": {"name": "en-de", "version": "1"},
                }
            ]
        }
    )

    translations: list[TextTranslation] = Field(description="One per input text, in order.")
    model: ModelRef = Field(description="The model that produced these translations.")
    detected_language: DetectedLanguage | None = Field(
        None, description='With source_lang "auto": the language detected (of all texts together).'
    )


class DetectedLanguage(BaseModel):
    language: str = Field(description="ISO 639-1.", examples=["de"])
    confidence: float = Field(
        description="0 to 1, over the languages this server serves (they sum to 1).", examples=[0.97]
    )


class DetectRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] = Field(description="One text, or a list of texts; one detection per text.")

    @field_validator("text")
    @classmethod
    def _texts_not_empty_and_valid_unicode(cls, value: str | list[str]) -> str | list[str]:
        return _check_texts(value)


class Detection(BaseModel):
    language: str | None = Field(description="The most likely language; null when the text gives nothing to go on.")
    confidence: float
    candidates: list[DetectedLanguage] = Field(description="Every language served, most likely first.")


class UsageResponse(BaseModel):
    key: str | None = Field(None, description="The key's name (MT_API_KEYS; MT_API_KEY's is default).")
    characters_today: int | None = Field(None, description="Characters translated since 00:00 UTC.")
    characters_per_day: int | None = Field(None, description="The key's daily limit; null: none.")
    requests_per_minute: int | None = Field(None, description="The key's rate; null: none.")


class DetectResponse(BaseModel):
    detections: list[Detection] = Field(description="One per text, in order.")


class ErrorResponse(BaseModel):
    """Every error: a stable code, a message that says what to fix, the request's id in the logs."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": "too_large",
                    "message": "text[2] has 12000 characters; the limit is 10000 (MT_MAX_CHARS)",
                    "request_id": "3f2a9c0e8d1b4a67",
                }
            ]
        }
    )

    error: str = Field(description="Machine-readable code, e.g. validation, too_large, overloaded, timeout.")
    message: str
    request_id: str
    details: list[dict[str, Any]] | None = Field(None, description="Validation errors: where and what.")


class Health(BaseModel):
    status: str = Field(examples=["ok"])


class ModelState(BaseModel):
    name: str
    status: str = Field(description="ready, loading or failed.", examples=["ready"])
    version: str | None = Field(None, description="The version serving now (absent until the first load).")
    source_lang: str | None = None
    target_lang: str | None = None
    message: str | None = Field(None, description="Why the last load failed.")


class Readiness(BaseModel):
    status: str = Field(description="ready (every model), loading, failed or draining.", examples=["ready"])
    model: ModelRef | None = Field(None, description="The default model (the first configured), when ready.")
    models: list[ModelState] = Field(default_factory=list, description="Every model's own state.")
    message: str | None = Field(None, description="Why not ready.")


class LanguagePair(BaseModel):
    source_lang: str = Field(examples=["en"])
    target_lang: str = Field(examples=["de"])
    model: str = Field(description="The model serving this pair (requests may name it in `model`).")
    version: str | None = Field(None, description="Its version (absent until it has loaded).")
    ready: bool


class Languages(BaseModel):
    pairs: list[LanguagePair] = Field(
        description="Every language pair served, in the server's order; where two models serve one pair, the "
        "first serves requests that name only the languages."
    )


class ModelList(BaseModel):
    models: list[ModelState]


class ModelInfo(BaseModel):
    name: str
    version: str
    source_language: str
    target_language: str
    provider: str = Field(description="onnxruntime execution provider in use.", examples=["CPUExecutionProvider"])
    graphs: str = Field(
        "main",
        description="Which of the bundle's graph sets runs: main, or a variant such as cuda (MT_GRAPHS).",
        examples=["main"],
    )
    dtype: str | None = Field(
        None,
        description="What the running graphs compute in (fp32, fp16, fp16w, int8, int8-channel, int8-static, ...); "
        "dynamic int8 graphs' (int8, int8-channel*) translations can depend on the sentences batched with them, "
        "float and int8-static graphs' do not (docs/bundle.md, Batch mates).",
        examples=["int8-channel-fp32-logits"],
    )
    loaded_at: float = Field(description="Unix time the model went live.")
    manifest: dict[str, Any] = Field(description="The bundle's manifest: architecture, scores, checksums, ...")


class ReloadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(
        None, description="The model to reload, by name; may be left out when the server serves one model."
    )
    bundle: str | None = Field(None, description="Bundle directory to load; default: the model's configured one.")


class ReloadResponse(BaseModel):
    status: str = Field(examples=["reloaded"])
    model: ModelRef
    previous: ModelRef | None = None
    bundle: str
    load_seconds: float
