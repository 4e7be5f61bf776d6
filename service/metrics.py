"""Prometheus metrics of one server, on a registry of its own (two apps never clash)."""

from __future__ import annotations

import functools
import platform
from importlib import metadata
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from inference.capture import GATE
from inference.static_state import OPENED, OPENED_KINDS

# A health check answers in milliseconds; a long text at beam 4 on two CPU cores in tens of seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
# A sentence waits from sub-millisecond (an idle GPU) to the batch wait (MT_MAX_WAIT_MS, 5 ms) and on under load.
QUEUE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SENTENCE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)

CONTENT_TYPE = CONTENT_TYPE_LATEST

disable_created_metrics()  # no ``_created`` twin of every counter and histogram


def _onnxruntime_version() -> str:
    gpu = _version("onnxruntime-gpu")
    return gpu if gpu != "unknown" else _version("onnxruntime")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def model_label(engine: Any) -> str:
    """The ``model`` label of an engine's work: its manifest's name."""
    return str(getattr(engine, "manifest", {}).get("name", "unknown"))


class Metrics:
    """Every metric the server exports; Prometheus naming conventions, ``mt_`` prefix."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.request_seconds = Histogram(
            "mt_http_request_duration_seconds",
            "Time from request received to response sent, by route template and status code.",
            ["route", "method", "status"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.requests_in_flight = Gauge(
            "mt_http_requests_in_flight", "HTTP requests being handled right now.", registry=r
        )
        self.queue_wait_seconds = Histogram(
            "mt_queue_wait_seconds",
            "Time a sentence waited in the batch queue before its batch started decoding.",
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "mt_queue_depth_sentences",
            "Sentences waiting in the batch queue (not yet decoding).",
            registry=r,
        )
        self.batch_sentences = Histogram(
            "mt_batch_size_sentences",
            "Sentences per decoded batch; with the continuous scheduler, per decoder step (the running set).",
            buckets=SENTENCE_BUCKETS,
            registry=r,
        )
        self.batch_tokens = Histogram(
            "mt_batch_size_tokens",
            "Source tokens per decoded batch (per step with the continuous scheduler), padding included "
            "(sentences x longest).",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.decode_seconds = Histogram(
            "mt_batch_decode_duration_seconds",
            "Engine time to translate one batch (beam search, all steps).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.step_seconds = Histogram(
            "mt_step_duration_seconds",
            "Time of one decoder step of a running set, with its beam search (continuous batching).",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.admit_seconds = Histogram(
            "mt_admit_duration_seconds",
            "Time of one admission into a running set: the new sentences' encoder pass and the merge of their "
            "memory into the set's (continuous batching).",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.admitted_mid_run = Counter(
            "mt_admitted_mid_run_sentences",
            "Sentences that joined a running set while other sentences were decoding in it.",
            registry=r,
        )
        self.input_tokens = Counter(
            "mt_input_tokens",
            "Source tokens (sentencepiece pieces) sent to the engine, by model.",
            ["model"],
            registry=r,
        )
        self.generated_tokens = Counter(
            "mt_generated_tokens",
            "Target tokens of the best hypotheses the engine returned, by model.",
            ["model"],
            registry=r,
        )
        self.sentences = Counter(
            "mt_translated_sentences",
            "Sentences decoded, by model (those answered from the translation cache are mt_cache_sentences_total).",
            ["model"],
            registry=r,
        )
        self.texts = Counter("mt_translated_texts", "Texts of requests translated, by model.", ["model"], registry=r)
        self.glossary_terms = Counter(
            "mt_glossary_terms",
            "Glossary terms found in sentences, by model and outcome: present (the translation had the term's "
            "translation), replaced (it took the words aligned to the term), unplaced (no word was aligned to it).",
            ["model", "outcome"],
            registry=r,
        )
        self.key_requests = Counter(
            "mt_api_key_requests", "Requests admitted, by API key (its name in MT_API_KEYS).", ["key"], registry=r
        )
        self.key_characters = Counter(
            "mt_api_key_characters",
            "Characters translated, by API key (what its daily limit counts).",
            ["key"],
            registry=r,
        )
        self.key_refusals = Counter(
            "mt_api_key_refusals",
            "Requests refused for a key's limits, by API key and limit (rate: requests a minute, quota: characters "
            "a day).",
            ["key", "limit"],
            registry=r,
        )
        self.cache_sentences = Counter(
            "mt_cache_sentences",
            "Sentences looked up in the translation cache (MT_CACHE_MB), by model and result: hit (answered from "
            "it, not decoded) or miss (decoded).",
            ["model", "result"],
            registry=r,
        )
        self.cache_bytes = Gauge(
            "mt_cache_bytes", "Memory the translation cache holds (estimated), all models together.", registry=r
        )
        self.characters = Counter(
            "mt_translated_characters", "Characters of the texts translated, by model.", ["model"], registry=r
        )
        self.errors = Counter(
            "mt_errors",
            "Requests that failed, by reason (validation, too_large, overloaded, timeout, ...).",
            ["reason"],
            registry=r,
        )
        self.reloads = Counter(
            "mt_model_reloads",
            "Reloads of a model being served (admin or SIGHUP), by model and result; the start-up load is not one.",
            ["model", "result"],
            registry=r,
        )
        self.ready = Gauge("mt_ready", "1 when every model is loaded and warmed up, else 0.", registry=r)
        self.model_ready = Gauge("mt_model_ready", "1 when the model is loaded and warmed up.", ["model"], registry=r)
        self.model = Gauge(
            "mt_model_info",
            "The models being served (value 1): name, version and execution provider.",
            ["name", "version", "provider"],
            registry=r,
        )
        self._model_labels: dict[str, tuple[str, str, str]] = {}
        Gauge(
            "mt_build_info",
            "Versions of this server and what it runs on (value 1).",
            ["version", "python", "onnxruntime"],
            registry=r,
        ).labels(_version("transformer-mt"), platform.python_version(), _onnxruntime_version()).set(1)
        static = Gauge(
            "mt_static_opened",
            "With --static-step: sessions and buffer sets opened so far by kind (decoder: a bucket's step; encoder: "
            "an admission bucket; buffers: a set's device tensors, each capturing its own CUDA graphs).",
            ["kind"],
            registry=r,
        )
        for kind in OPENED_KINDS:
            static.labels(kind).set_function(functools.partial(OPENED.__getitem__, kind))
        Gauge(
            "mt_cuda_graph_captures",
            "Runs so far that entered the capture gate exclusive: CUDA graph captures (inference/capture.py).",
            registry=r,
        ).set_function(lambda: float(GATE.captures))
        ProcessCollector(registry=r)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        PlatformCollector(registry=r)  # python_info

    def set_model(self, name: str, version: str, provider: str) -> None:
        """``name`` went live with this version: its info series replaces the previous version's."""
        previous = self._model_labels.get(name)
        if previous is not None and previous != (name, version, provider):
            self.model.remove(*previous)
        self._model_labels[name] = (name, version, provider)
        self.model.labels(name, version, provider).set(1)
        self.model_ready.labels(name).set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)
