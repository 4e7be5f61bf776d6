"""The server's settings: one object, from ``MT_*`` environment variables and command-line flags.

There is deliberately no ``workers`` setting: one server process owns one device (its models, one
batch queue). For more throughput run more replicas behind a load balancer, not more processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from core.sentences import PART_PIECES
from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE

Provider = Literal["auto", "cpu", "cuda"]
LogLevel = Literal["debug", "info", "warning", "error"]


CPU_DEFAULTS = {"max_batch_tokens": 4096, "max_batch_sentences": 64, "admit_every": 1, "inflight_batches": 2}
GPU_DEFAULTS = {"max_batch_tokens": 16384, "max_batch_sentences": 128, "admit_every": 8, "inflight_batches": 1}
"""What -1 stands for, by provider (service/app.py, ``resolve``). On an H200 (docs/scheduler.md, "Measured on an
H200"): the CPU's 4096 tokens held the continuous server's running sets to about 42 news sentences while the engine
alone was fastest at batch 256, and one running set admitting every 8 steps served 1.32x (64 clients) and 1.18x
(128) the sentences/s of two sets admitting at every step. The batch scheduler keeps 2 batches in flight on a GPU
(not measured with 1)."""


class Settings(BaseSettings):
    """Every knob of the server, with its default; environment ``MT_<FIELD>`` (``MT_MAX_QUEUE``)."""

    model_config = SettingsConfigDict(env_prefix="MT_", extra="ignore", validate_default=True)

    bundle: Path = Field(
        Path("models/en-de"),
        description="Model bundle directory to serve. Unset (and no MT_BUNDLES): models/en-de, and models/de-en "
        "beside it where that exists.",
    )
    bundles: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Several models in one server, comma-separated: bundle directories, or directories whose "
        "sub-directories are bundles; the first is the default model (docs/service.md). Overrides MT_BUNDLE.",
    )
    host: str = Field(
        "0.0.0.0",
        description="Address to listen on (0.0.0.0: every interface, as containers need).",
    )
    port: int = Field(8000, ge=0, le=65535, description="TCP port to listen on.")
    provider: Provider = Field("auto", description="Execution provider: auto (CUDA if a GPU is usable), cpu, cuda.")
    threads: int = Field(
        0,
        ge=0,
        description="onnxruntime intra-op threads of each batch in flight; 0: on the CPU, the usable CPUs (the "
        "container's CPU limit included) divided among --inflight-batches, at least 1 (docs/scheduler.md); on a "
        "GPU or with --shared-pool, onnxruntime's default.",
    )
    shared_pool: bool = Field(
        False,
        description="Every model's sessions share one pool of --threads intra-op threads (inference/threads.py): "
        "the engine alone is faster, most at batch 1, but on 2 cores the server with 2 batches in flight served "
        "less at 32 clients (0.9x), so it is off by default (docs/inference-core.md).",
    )

    max_batch_tokens: int = Field(
        -1,
        ge=-1,
        description="Token budget of a batch (or running set): sentences x longest source (pieces, with padding); "
        "-1: 4096 on the CPU, 16384 on a GPU, where the engine's throughput still grows past batch 128 "
        "(docs/scheduler.md).",
    )
    max_batch_sentences: int = Field(
        -1, ge=-1, description="Most sentences in one batch (or running set); -1: 64 on the CPU, 128 on a GPU."
    )
    max_wait_ms: float = Field(
        5.0,
        ge=0,
        description="Batch scheduler only: how long a batch's first sentence waits for company before it runs anyway.",
    )
    scheduler: Literal["auto", "batch", "continuous"] = Field(
        "auto",
        description="continuous: sentences join and leave the engine's running sets between decoder steps "
        "(service/scheduler.py); batch: whole batches, each decoded to its last sentence (service/batcher.py); "
        "auto: continuous (measured against batch on the CPU and a GPU in docs/scheduler.md).",
    )
    inflight_batches: int = Field(
        -1,
        ge=-1,
        le=8,
        description="Batches (or running sets, with the continuous scheduler) decoding at once on the one "
        "engine; -1: 2 on the CPU, where one's graph call keeps the cores busy while another's beam search works "
        "(docs/reports/load/report.md), and on a GPU 1 with the continuous scheduler, which served more there "
        "(docs/scheduler.md), 2 with the batch scheduler.",
    )
    graphs: str = Field(
        "auto",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Which of a bundle's graph sets to serve: auto (its GPU set, e.g. cuda, on a GPU; the main "
        "graphs, int8 in the shipped models, on the CPU), main, float (the first set that is not int8), or a set's "
        "name. float on the CPU: a sentence translates the same whatever it is batched with, at 0.78-0.84x the int8 "
        'graphs\' speed with the shipped model (docs/bundle.md, "Batch mates").',
    )
    shortlist: bool = Field(
        False,
        description="Score only the target pieces each sentence may plausibly produce (the bundle's vocabulary "
        "shortlist, `python -m training shortlist`; bundles without one decode as before, with a warning): on the "
        "CPU a sentence alone decoded 1.16x (en-de) and 1.44x (de-en) as fast at the same mean BLEU, though many "
        "translations change a little; larger sets use the whole vocabulary (docs/performance.md). Off by default.",
    )
    static_step: bool = Field(
        False,
        description="Decode with fixed-shape state, each decoder step replayed as a CUDA graph on a GPU "
        "(inference/static_state.py); the bundle's GPU graphs must have been exported with --static-step. "
        "Off by default: on an H200 the engine alone decoded faster with it, but the server served less, opening "
        "buckets under load (MT_STATIC_WARM now opens them at load; docs/inference-core.md).",
    )
    masked_step: bool = Field(
        False,
        description="Keep each running set's self-attention caches in place, each step reading a hypothesis' past "
        "through a beam index instead of gathering the caches (inference/clock_state.py); the bundle's graphs must "
        "have been exported with --masked-step. Off by default: on the CPU it decoded 0.74-1.01x the default state; "
        'not yet measured on a GPU (docs/inference-core.md, "The cache without moves"). Not with --static-step or '
        "--shortlist.",
    )
    static_warm: int = Field(
        -1,
        ge=-1,
        description="With --static-step: open at load, before the server is ready, the fixed-shape buckets of running "
        "sets of up to this many sentences (each one's decoder session and buffers and, on a GPU, its steps captured "
        "as CUDA graphs on the thread that will decode), within 1 GiB of buffers, smallest first; larger ones open on "
        "first use. -1: MT_MAX_BATCH_SENTENCES; 0: none, every bucket opens on first use (docs/inference-core.md).",
    )
    lanes: int = Field(
        1,
        ge=1,
        le=4,
        description="Each decoding thread (a running set's worker, --inflight-batches of them) steps on decoder "
        "sessions of its own (the static ones with --static-step), so that on a GPU one set's step can run while the "
        "host searches another's instead of the two taking turns on one session (its runs share a CUDA stream); the "
        "warm-up runs on every lane's thread and, with --static-warm, opens every lane's buckets. Give it "
        "--inflight-batches. Each lane holds its own copy of the decoder's weights (a bucket's, with static steps). "
        '1: one lane, the threads share the sessions. Not yet measured on a GPU (docs/inference-core.md, "Lanes").',
    )
    engine_process: bool | None = Field(
        None,
        description="Continuous scheduler: load the models and run the scheduler in a process of their own, so "
        "that HTTP, sentence splitting and tokenization never hold the decoding thread's GIL "
        "(service/engine_process.py); unset (auto): on a GPU, where it served 1.36-1.80x the sentences/s at 64-128 "
        "clients on an H200, off on the CPU, where it gained nothing (docs/scheduler.md).",
    )
    admit_every: int = Field(
        -1,
        ge=-1,
        le=64,
        description="Continuous scheduler: a running set admits waiting sentences at most every N decoder steps "
        "(at once when it is empty or when they fill its free room), so one encoder call serves several "
        "arrivals; 1 admits at every step; -1: 1 on the CPU, 8 on a GPU (docs/scheduler.md).",
    )
    refill_at: int = Field(
        -1,
        ge=-1,
        le=1024,
        description="Continuous scheduler: a running set takes in waiting sentences only while at most this many "
        "decode in it, so under load it fills, drains and refills much as a whole batch does; 0: only when empty; "
        "-1: 2 on the CPU, no limit on a GPU (docs/scheduler.md).",
    )
    admit_by_length: bool = Field(
        True,
        description="Continuous scheduler: when not every waiting sentence fits in a running set, it takes the "
        "waiting sentences of similar length that hold the oldest, as the batch scheduler cuts its batches, "
        "instead of the first in arrival order (docs/scheduler.md).",
    )
    cohorts: int = Field(
        0,
        ge=0,
        le=16,
        description="Continuous scheduler: most cohorts in a running set. Late arrivals start a new one "
        "instead of padding their cache to the set's oldest sentence (inference/engine.py, RunningSet). "
        "0: 4 on the CPU, 1 on a GPU or with --static-step (docs/scheduler.md).",
    )
    part_pieces: int = Field(
        PART_PIECES,
        ge=0,
        description="A sentence of more source pieces than this is translated in parts of at most this many, cut at "
        "its semicolons, commas or spaces (core/sentences.py fit): the models drop content from long sentences "
        "(docs/long-sentences.md). 0: only sentences longer than the model takes are cut, into parts as long as it "
        "takes.",
    )
    max_queue: int = Field(
        1024,
        ge=1,
        description="Most sentences waiting to be decoded; beyond, requests get 503 + Retry-After.",
    )
    cache_mb: float = Field(
        64.0,
        ge=0,
        description="Memory for sentences translated before: a sentence sent again with the same model and decoding "
        "options is answered from it without decoding (service/cache.py); 0 turns it off.",
    )
    request_timeout_s: float = Field(
        30.0,
        gt=0,
        description="A request unanswered after this long gets 504; its queued work is dropped.",
    )

    no_repeat_ngram_size: int = Field(
        DEFAULT_NO_REPEAT_NGRAM_SIZE,
        ge=0,
        le=16,
        description="Requests that do not say otherwise never repeat an n-gram of this many target "
        "pieces within a translation; 0 turns the guard off (docs/service.md).",
    )
    length_penalty: float = Field(
        DEFAULT_LENGTH_PENALTY,
        ge=0,
        le=5,
        description="Requests that do not say otherwise rank hypotheses by log-probability / length ** this; "
        "chosen on the default model's dev set; larger values give longer translations (docs/service.md).",
    )

    max_texts: int = Field(64, ge=1, description="Most texts in one /translate request (413 beyond).")
    max_chars: int = Field(10_000, ge=1, description="Most characters in one text (413 beyond).")
    max_body_bytes: int = Field(1_000_000, ge=1, description="Largest request body in bytes (413 beyond).")
    max_document_segments: int = Field(
        10_000,
        ge=1,
        description="Most paragraphs and strings in one uploaded document (413 beyond); they are translated "
        "MT_MAX_TEXTS at a time, each group waiting its turn while the queue is full.",
    )
    document_groups: int = Field(
        2,
        ge=1,
        description="Groups of MT_MAX_TEXTS paragraphs of one document decoded at once (each joins the running "
        "set as the others do; 1: one after the other).",
    )
    max_document_bytes: int = Field(
        20_000_000,
        ge=1,
        description="Largest uploaded document in bytes, the multipart body around it included (413 beyond): "
        "an office file carries its pictures.",
    )
    max_attention_pieces: int = Field(
        1024,
        ge=1,
        description="Most source pieces in one request with return_attention (its maps grow as source x "
        "target pieces; 413 beyond).",
    )

    glossary: Path | None = Field(
        None,
        description='A JSON file of glossaries by language pair, {"en-de": {"password": "Kennwort"}}: applied to '
        "every request of that pair, on every API (a request's own glossary adds to it and wins where both name a "
        "term; docs/service.md#glossaries). Read at start.",
    )
    document_dir: Path | None = Field(
        None,
        description="Where translated documents wait for their clients (DeepL's document results, LibreTranslate's "
        "downloads), so that replicas sharing the directory answer for each other's and a restart loses none; "
        "made if missing. Unset: in memory only (docs/service.md#documents).",
    )
    glossary_dir: Path | None = Field(
        None,
        description="Where the glossaries clients create through the DeepL API (POST /deepl/v2/glossaries) are kept, "
        "one JSON file each, so that they outlive a restart and replicas sharing the directory see each other's; "
        "unset: in memory only (docs/service.md#deepls-api).",
    )

    api_key: SecretStr | None = Field(
        None, description="If set, requests need this key (X-API-Key; every API, docs/service.md#api-keys)."
    )
    api_keys: Path | None = Field(
        None,
        description='A JSON file of named keys with optional limits, {"team-a": {"key": "...", '
        '"requests_per_minute": 120, "characters_per_day": 2000000}} (or "key_sha256"): requests need one of them '
        "(docs/service.md#api-keys). Read at start.",
    )
    admin_token: SecretStr | None = Field(
        None,
        description="If set, enables POST /admin/reload with 'Authorization: Bearer <token>'.",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Origins allowed by CORS, comma-separated ('*' for any); empty: CORS off.",
    )

    log_level: LogLevel = Field("info", description="Log level of the JSON logs on stderr.")
    debug: bool = Field(False, description="Log request texts too (never do this with private data).")

    @field_validator("max_batch_tokens", "max_batch_sentences", "inflight_batches", "admit_every")
    @classmethod
    def _a_budget(cls, value: int) -> int:
        if value == 0:
            raise ValueError("0 is not a size or a count: give a positive one, or -1 for the provider's default")
        return value

    @field_validator("engine_process", mode="before")
    @classmethod
    def _auto_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("", "auto") else value

    @field_validator("cors_origins", "bundles", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value

    @field_validator("api_key", "admin_token", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value  # MT_API_KEY=""

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value
