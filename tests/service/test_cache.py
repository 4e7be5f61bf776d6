"""The translation cache (service/cache.py): a sentence sent again is answered without decoding, with the answer
it got the first time; a change of model, options or a reload decodes again; the bytes stay under the bound."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from core.translation import Hypothesis, Translation
from service.batcher import RequestTimeout
from service.cache import TranslationCache, size_of
from testkit.fake_engine import FakeLoader, write_fake_bundle
from tests.service.servers import ThreadServer, settings_for, thread_server

ADMIN = {"Authorization": "Bearer t0ken"}


def translation(pieces: int, n_best: int = 1, attention: bool = False, seed: int = 0) -> Translation:
    words = [f"▁w{seed}x{i}" for i in range(pieces)]
    hypotheses = [
        Hypothesis(
            text=" ".join(w.lstrip("▁") for w in words),
            pieces=list(words),
            token_ids=list(range(1000 + seed, 1000 + seed + pieces)),
            score=-0.5,
            token_logprobs=[-0.1 * i for i in range(pieces)],
            attention=np.full((pieces, pieces), 1.0 / pieces) if attention else None,
        )
        for _ in range(n_best)
    ]
    return Translation(source_pieces=list(words), hypotheses=hypotheses)


@pytest.fixture
def loader() -> FakeLoader:
    return FakeLoader()


@pytest.fixture
def server(tmp_path: Path, loader: FakeLoader) -> Iterator[ThreadServer]:
    bundle = write_fake_bundle(tmp_path / "b")
    with thread_server(settings_for(bundle, cache_mb=1, admin_token="t0ken"), loader) as running:
        yield running


def decoded(loader: FakeLoader) -> list[str]:
    engine = loader.last
    return [" ".join(engine.words(ids)) for batch in engine.batches for ids in batch]


def test_a_sentence_sent_again_is_not_decoded_again(server: ThreadServer, loader: FakeLoader) -> None:
    first = server.client.post("/translate", json={"text": "a b. c d."}).json()
    assert decoded(loader) == ["a b.", "c d."]
    again = server.client.post("/translate", json={"text": ["c d. a b.", "e f. a b."]}).json()
    assert decoded(loader) == ["a b.", "c d.", "e f."]  # only the new sentence, once
    assert first["translations"][0]["text"] == "b. a d. c"
    assert [t["text"] for t in again["translations"]] == ["d. c b. a", "f. e b. a"]
    metrics = server.client.get("/metrics").text
    assert 'mt_cache_sentences_total{model="fake-en-de",result="hit"} 3.0' in metrics
    assert 'mt_cache_sentences_total{model="fake-en-de",result="miss"} 3.0' in metrics
    assert float(next(line.split()[1] for line in metrics.splitlines() if line.startswith("mt_cache_bytes "))) > 0


def test_a_sentence_twice_in_one_request_is_decoded_once(server: ThreadServer, loader: FakeLoader) -> None:
    body = server.client.post("/translate", json={"text": ["x y", "x y", "z"]}).json()
    assert [t["text"] for t in body["translations"]] == ["y x", "y x", "z"]
    assert decoded(loader) == ["x y", "z"]


def test_other_options_or_a_reload_decode_again(server: ThreadServer, loader: FakeLoader) -> None:
    server.client.post("/translate", json={"text": "a b"})
    server.client.post("/translate", json={"text": "a b", "beam_size": 2})
    body = server.client.post("/translate", json={"text": "a b", "return_attention": True}).json()
    assert body["translations"][0]["attention"]["weights"]  # the cached entry without rows was not used
    assert decoded(loader) == ["a b"] * 3
    server.client.post("/translate", json={"text": "a b", "beam_size": 2})
    assert decoded(loader) == ["a b"] * 3
    r = server.client.post("/admin/reload", json={}, headers=ADMIN)
    assert r.status_code == 200, r.text
    server.client.post("/translate", json={"text": "a b"})
    assert decoded(loader) == ["a b"]  # the reloaded model's engine decoded it


def test_glossaries_and_markup_are_applied_to_a_cached_sentence(server: ThreadServer, loader: FakeLoader) -> None:
    plain = server.client.post("/translate", json={"text": "alpha password beta", "return_attention": True})
    assert plain.json()["translations"][0]["text"] == "beta password alpha"
    termed = server.client.post(
        "/translate", json={"text": "alpha password beta", "glossary": {"password": "Kennwort"}}
    )
    assert termed.json()["translations"][0]["text"] == "beta Kennwort alpha"
    marked = server.client.post("/translate", json={"text": "alpha <b>password</b> beta", "format": "html"})
    assert marked.json()["translations"][0]["text"] == "beta <b>password</b> alpha"
    assert len(decoded(loader)) == 1  # one decoding, with attention rows, served all three
    again = server.client.post("/translate", json={"text": "alpha password beta", "return_attention": True})
    assert again.json() == plain.json()  # the glossary did not change the cached entry


def test_off_with_0_mb(tmp_path: Path, loader: FakeLoader) -> None:
    with thread_server(settings_for(write_fake_bundle(tmp_path / "b"), cache_mb=0), loader) as s:
        for _ in range(2):
            s.client.post("/translate", json={"text": "a b"})
        assert decoded(loader) == ["a b", "a b"]
        assert s.service.cache is None


def test_least_recently_used_goes_first_and_the_bytes_stay_bounded() -> None:
    entries = {key: translation(10, seed=key) for key in range(4)}
    cache = TranslationCache(max_bytes=3 * size_of(entries[0]))
    for key in range(3):
        cache.put(key, entries[key])
    assert cache.get(0) is entries[0]  # 0 is now the most recently used
    cache.put(3, entries[3])
    assert cache.get(1) is None and cache.get(0) is entries[0] and len(cache) == 3
    assert cache.bytes <= cache.max_bytes
    cache.put(9, translation(500))  # larger than the whole cache: not kept, nothing dropped for it
    assert cache.get(9) is None and len(cache) == 3
    cache.put(8, Translation(source_pieces=["▁x"], hypotheses=[]))  # a failed sentence is not kept
    assert cache.get(8) is None


@pytest.mark.parametrize(
    ("pieces", "n_best", "attention"), [(5, 1, False), (25, 1, False), (25, 4, False), (25, 1, True)]
)
def test_the_size_estimate_is_within_a_factor_of_two_of_the_memory_held(
    pieces: int, n_best: int, attention: bool
) -> None:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = TranslationCache(max_bytes=1 << 40)
        for seed in range(200):
            cache.put(
                (("model", "1", 0.0, "b"), tuple(range(seed, seed + pieces)), seed),
                translation(pieces, n_best, attention, seed),
            )
        held = (tracemalloc.get_traced_memory()[0] - before) / len(cache)
    finally:
        tracemalloc.stop()
    estimate = cache.bytes / len(cache)
    assert held / 2 <= estimate <= held * 2, (estimate, held)


def test_concurrent_requests_for_the_same_new_sentence_decode_it_once(tmp_path: Path, loader: FakeLoader) -> None:
    bundle = write_fake_bundle(tmp_path / "slow", delay_s=0.3)
    with thread_server(settings_for(bundle, cache_mb=1, max_wait_ms=0), loader) as s:
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: s.client.post("/translate", json={"text": "a b"}).json(), range(4)))
        assert {a["translations"][0]["text"] for a in answers} == {"b a"}
        assert decoded(loader) == ["a b"]
        metrics = s.client.get("/metrics").text
        assert 'mt_cache_sentences_total{model="fake-en-de",result="hit"} 3.0' in metrics


def test_a_request_waiting_for_a_sentence_another_failed_to_decode_decodes_it_itself() -> None:
    async def scenario() -> tuple[list[str], list[list[Hashable]]]:
        cache, calls = TranslationCache(1 << 20), []
        started, release = asyncio.Event(), asyncio.Event()

        async def failing(keys: list[Hashable], seconds: float) -> list[Translation]:
            calls.append(keys)
            started.set()
            await release.wait()
            raise RuntimeError("the engine failed")

        async def working(keys: list[Hashable], seconds: float) -> list[Translation]:
            calls.append(keys)
            return [translation(2, seed=int(str(key)[-1])) for key in keys]

        owner = asyncio.create_task(cache.translate(["k1"], failing, 5))
        await started.wait()
        waiter = asyncio.create_task(cache.translate(["k1", "k2"], working, 5))
        await asyncio.sleep(0.01)
        release.set()
        with pytest.raises(RuntimeError):
            await owner
        looked = await waiter
        return [t.hypotheses[0].text for t in looked.translations], calls

    texts, calls = asyncio.run(scenario())
    assert calls == [["k1"], ["k2"], ["k1"]]  # the waiter decoded its own k2, waited for k1, then decoded k1 itself
    assert texts == ["w1x0 w1x1", "w2x0 w2x1"]


def test_two_requests_waiting_on_each_others_sentences_both_finish() -> None:
    async def scenario() -> list[int]:
        cache = TranslationCache(1 << 20)
        gate = asyncio.Event()

        async def slow(keys: list[Hashable], seconds: float) -> list[Translation]:
            await gate.wait()
            return [translation(1, seed=int(str(key)[-1])) for key in keys]

        first = asyncio.create_task(cache.translate(["k1", "k2"], slow, 5))  # decodes both
        await asyncio.sleep(0.01)
        second = asyncio.create_task(cache.translate(["k3", "k2", "k1"], slow, 5))  # decodes k3, waits for k1, k2
        await asyncio.sleep(0.01)
        gate.set()
        done = await asyncio.wait_for(asyncio.gather(first, second), 5)
        return [d.decoded for d in done] + [d.hits for d in done]

    assert asyncio.run(scenario()) == [2, 1, 0, 2]


def test_a_waiter_times_out_like_a_decoding_request() -> None:
    async def scenario() -> None:
        cache = TranslationCache(1 << 20)

        async def never(keys: list[Hashable], seconds: float) -> list[Translation]:
            await asyncio.sleep(10)
            return []

        owner = asyncio.create_task(cache.translate(["k"], never, 10))
        await asyncio.sleep(0.01)
        with pytest.raises(RequestTimeout):
            await cache.translate(["k"], never, 0.05)
        owner.cancel()

    asyncio.run(scenario())
