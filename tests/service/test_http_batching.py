"""Cross-request batching, observed from outside: the engine's batches and /metrics."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import settings_for, thread_server

TEXTS = [
    "the quick brown fox",
    "jumps over. the lazy dog",
    "a",
    "one two three four five six",
    "Hello there. General Kenobi.",
    "short",
    "medium sized sentence here",
    "last one in the burst",
]


def metric(text: str, name: str) -> float:
    """The value of one sample line ``name value`` in Prometheus text format."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def test_concurrent_requests_are_batched_and_translate_as_alone(tmp_path: Path) -> None:
    """The batch scheduler: a burst waits up to max_wait_ms for company and decodes as one batch (the continuous
    scheduler, the default, is tested in tests/service/test_scheduler.py and test_server_real_bundle.py)."""
    bundle = write_fake_bundle(tmp_path / "b", delay_s=0.05)
    loader = FakeLoader()
    # the cache off: the texts sent again alone must be decoded again
    with thread_server(settings_for(bundle, max_wait_ms=250, scheduler="batch", cache_mb=0), loader) as s:
        engine = loader.last

        def send(text: str) -> dict[str, Any]:
            body = {"text": text, "return_scores": True}
            r = s.client.post("/translate", json=body, timeout=10)
            assert r.status_code == 200, r.text
            return dict(r.json()["translations"][0])

        with ThreadPoolExecutor(len(TEXTS)) as pool:
            together = list(pool.map(send, TEXTS))
        assert sum(engine.batch_sizes) == 10  # sentences in the eight texts
        assert max(engine.batch_sizes) >= 6, engine.batch_sizes  # most of the burst in one batch
        burst_batches = len(engine.batches)

        alone = [send(text) for text in TEXTS]
        assert together == alone
        assert len(engine.batches) == burst_batches + len(TEXTS)

        metrics = s.client.get("/metrics").text
        assert metric(metrics, "mt_batch_size_sentences_count") == burst_batches + len(TEXTS)
        assert metric(metrics, "mt_batch_size_sentences_sum") == 20
        assert metric(metrics, 'mt_batch_size_sentences_bucket{le="4.0"}') < burst_batches + len(
            TEXTS
        )  # at least one batch of more than 4 sentences
        assert metric(metrics, 'mt_translated_sentences_total{model="fake-en-de"}') == 20


def test_health_and_metrics_answer_while_the_engine_decodes(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "b", delay_s=1.0)
    loader = FakeLoader()
    with thread_server(settings_for(bundle, max_wait_ms=0), loader) as s:
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(s.client.post, "/translate", json={"text": "slow"}, timeout=10)
            while not loader.last.batches:
                time.sleep(0.01)
            started = time.monotonic()
            assert s.client.get("/healthz").status_code == 200
            metrics = s.client.get("/metrics").text
            assert time.monotonic() - started < 0.5
            assert metric(metrics, "mt_http_requests_in_flight") >= 1
            assert slow.result().status_code == 200
