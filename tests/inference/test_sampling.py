"""inference/sampling.py against the PyTorch model: greedy at top_k=1, the model's own log-probabilities for
what it draws, and draws that follow the model's distribution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from inference.engine import DeviceState, Engine
from inference.sampling import sample
from testkit.synthetic import make_pairs
from training.back_translate import back_translate
from training.checkpoint import load_model
from training.decode import greedy, next_logprobs, source_tensor
from training.model import Transformer

TEXTS = [s for s, _ in make_pairs(7, seed=5, min_len=1, max_len=7)] + ["red", "gold gold gold gold gold gold"]


@pytest.fixture(scope="module")
def engine(tiny_bundle: Path) -> Engine:
    return Engine.load(tiny_bundle, provider="cpu", threads=1)


@pytest.fixture(scope="module")
def model(tiny_checkpoint: Path) -> Transformer:
    torch.set_num_threads(1)
    return load_model(tiny_checkpoint)[0].eval()


def _sample(engine: Engine, sources: list[list[int]], max_lens: list[int], seed: int, top_k: int = 0):
    return sample(
        DeviceState(engine),
        sources,
        max_lens,
        vocab_size=engine.vocab_size,
        bos_id=engine.bos_id,
        eos_id=engine.eos_id,
        rng=np.random.default_rng(seed),
        top_k=top_k,
    )


def test_top_1_is_greedy_search(engine: Engine, model: Transformer) -> None:
    sources = [engine.tokenize(t) for t in TEXTS]
    max_lens = [3, *[2 * len(s) + 10 for s in sources[1:]]]  # the first stops at its cap, mid-run
    got = _sample(engine, sources, max_lens, seed=0, top_k=1)
    expected = greedy(model, sources, max_lens)
    assert [g.tokens for g in got] == [e.tokens for e in expected]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.token_logprobs, e.token_logprobs, atol=1e-4)


@pytest.mark.parametrize("top_k", [0, 4])
def test_draws_carry_the_models_log_probabilities(engine: Engine, model: Transformer, top_k: int) -> None:
    """Sentences leave the set at different steps; every drawn token's log-probability is the model's
    teacher-forced one for that prefix, so each row kept its own cache and memory."""
    sources = [engine.tokenize(t) for t in TEXTS]
    samples = _sample(engine, sources, [2 * len(s) + 10 for s in sources], seed=3, top_k=top_k)
    assert len({len(s.tokens) for s in samples}) > 2  # they did end at different steps
    for ids, drawn in zip(sources, samples, strict=True):
        src = source_tensor(model, [ids])
        memory = model.encode(src)
        prefix = torch.tensor([[engine.bos_id, *drawn.tokens]], dtype=torch.long)
        for t, token in enumerate(drawn.tokens):
            logp = next_logprobs(model, memory, src, prefix[:, : t + 1])[0]
            assert drawn.token_logprobs[t] == pytest.approx(float(logp[token]), abs=1e-4)
            if top_k:
                assert int((logp > logp[token]).sum()) < top_k  # among the k likeliest
        assert drawn.tokens[-1] == engine.eos_id or len(drawn.tokens) == 2 * len(ids) + 10


@pytest.mark.parametrize("top_k", [0, 3])
def test_first_tokens_follow_the_models_distribution(engine: Engine, model: Transformer, top_k: int) -> None:
    ids = engine.tokenize("gold pink white")
    draws = 3000
    samples = _sample(engine, [ids] * draws, [1] * draws, seed=7, top_k=top_k)
    counts = np.bincount([s.tokens[0] for s in samples], minlength=engine.vocab_size)
    src = source_tensor(model, [ids])
    logp = next_logprobs(model, model.encode(src), src, torch.tensor([[engine.bos_id]]))[0].double()
    p = logp.exp().numpy()
    if top_k:
        allowed = np.argsort(-p)[:top_k]
        assert set(np.flatnonzero(counts)) <= set(allowed.tolist())
        p = np.where(np.isin(np.arange(len(p)), allowed), p, 0.0)
        p /= p.sum()
    sigma = np.sqrt(draws * p * (1 - p))
    assert np.all(np.abs(counts - draws * p) <= 5 * sigma + 2)
    assert (counts > 0).sum() > 1  # not the same token every time


def test_same_seed_same_samples_and_the_command_writes_them(engine: Engine, tiny_bundle: Path, tmp_path: Path) -> None:
    sources = [engine.tokenize(t) for t in TEXTS]
    first, again = (_sample(engine, sources, [20] * len(sources), seed=11) for _ in range(2))
    assert [s.tokens for s in first] == [s.tokens for s in again]
    mono = tmp_path / "mono.txt"
    mono.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    runs = [tmp_path / "a.tsv", tmp_path / "b.tsv", tmp_path / "beam.tsv"]
    for out, seed in zip(runs[:2], (1, 2), strict=True):
        assert back_translate(tiny_bundle, mono, out, sample=True, seed=seed, threads=1) == len(TEXTS)
    back_translate(tiny_bundle, mono, runs[2], threads=1)
    a, b, beam = ([line.split("\t") for line in r.read_text(encoding="utf-8").splitlines()] for r in runs)
    assert [real for _, real in a] == [real for _, real in b] == TEXTS
    assert [s for s, _ in a] != [s for s, _ in b]  # two seeds, two draws
    assert [s for s, _ in a] != [s for s, _ in beam]
    with pytest.raises(SystemExit, match="choose one"):
        back_translate(tiny_bundle, mono, tmp_path / "c.tsv", sample=True, noise=True)
