import itertools
import math
from pathlib import Path

import pytest
import torch

from training import checkpoint
from training.config import load_config
from training.decode import attention_map, beam_search, greedy
from training.model import Transformer


def _random_model(vocab: int = 6) -> Transformer:
    cfg = load_config(
        "tiny",
        overrides=[
            f"model.vocab_size={vocab}",
            "model.d_model=16",
            "model.d_ff=32",
            "model.n_heads=2",
        ],
    )
    torch.manual_seed(7)
    model = Transformer(cfg.model).eval()
    with torch.no_grad():  # sharper distributions make the search matter
        model.embed_tokens.weight.mul_(6.0)
    return model


def _exhaustive(model: Transformer, source: list[int], max_len: int, lp: float) -> list[tuple[float, list[int]]]:
    """Score every possible output: sequences ending in EOS, or max_len tokens without it."""
    cfg = model.config
    src = torch.tensor([source + [cfg.eos_id]])
    memory = model.encode(src)
    tokens = [t for t in range(cfg.vocab_size) if t not in (cfg.pad_id, cfg.bos_id)]
    scored = []
    for length in range(1, max_len + 1):
        for body in itertools.product([t for t in tokens if t != cfg.eos_id], repeat=length - 1):
            for last in tokens:
                seq = list(body) + [last]
                if last != cfg.eos_id and length < max_len:
                    continue
                tgt_in = torch.tensor([[cfg.bos_id] + seq[:-1]])
                logp = model.decode(tgt_in, memory, src)[0].detach()
                logp = logp.masked_fill(
                    torch.isin(torch.arange(cfg.vocab_size), torch.tensor([cfg.pad_id, cfg.bos_id])),
                    float("-inf"),
                ).log_softmax(-1)[0]
                score = sum(float(logp[i, t]) for i, t in enumerate(seq))
                scored.append((score / len(seq) ** lp, seq))
    scored.sort(key=lambda s: -s[0])
    return scored


@pytest.mark.parametrize("lp", [0.0, 1.0])
def test_wide_beam_equals_exhaustive_search(lp: float) -> None:
    model = _random_model()
    source, max_len = [4, 5, 4], 3
    truth = _exhaustive(model, source, max_len, lp)
    outs = beam_search(model, source, beam_size=len(truth), max_len=max_len, length_penalty=lp, n_best=5)
    assert [o.tokens for o in outs] == [seq for _, seq in truth[:5]]
    for out, (score, _) in zip(outs, truth, strict=False):
        assert out.score == pytest.approx(score, abs=1e-4)


def test_beam_scores_are_the_sum_of_token_logprobs() -> None:
    model = _random_model()
    for out in beam_search(model, [4, 5], beam_size=3, max_len=6, length_penalty=1.0, n_best=3):
        assert out.score == pytest.approx(sum(out.token_logprobs) / len(out.tokens), abs=1e-5)
        assert all(lp <= 0 for lp in out.token_logprobs)


def test_beam_one_is_greedy_on_the_trained_model(
    tiny_checkpoint: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    model, _, files = checkpoint.load_model(tiny_checkpoint)
    tok = checkpoint.load_tokenizer(files, tmp_path)
    sources = [tok.encode_source(line.split("\t")[0]) for line in synthetic_corpus[1].read_text().splitlines()[:12]]
    lens = [2 * len(s) + 10 for s in sources]
    batched = greedy(model, sources, lens)
    for src, max_len, g in zip(sources, lens, batched, strict=True):
        b = beam_search(model, src, beam_size=1, max_len=max_len)[0]
        assert b.tokens == g.tokens
        assert b.score == pytest.approx(g.score, abs=1e-4)


def test_attention_map_rows_are_distributions() -> None:
    model = _random_model(vocab=12)
    weights = attention_map(model, [4, 5, 6], [7, 8, 3])
    assert weights.shape == (3, 4)
    assert torch.allclose(weights.sum(-1), torch.ones(3), atol=1e-5)
    assert math.isfinite(float(weights.sum()))
