"""The cached greedy search used for dev evaluation gives the reference greedy search's outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from training.cached_decode import cached_greedy
from training.checkpoint import load_model
from training.config import load_config
from training.decode import greedy
from training.model import Transformer


@pytest.mark.parametrize("pre_norm", [False, True])
def test_random_model_matches_reference(pre_norm: bool) -> None:
    cfg = load_config("tiny", overrides=["model.vocab_size=40", "model.d_model=32", f"model.pre_norm={pre_norm}"])
    torch.manual_seed(3)
    model = Transformer(cfg.model).eval()
    generator = torch.Generator().manual_seed(5)
    sources = [torch.randint(4, 40, (int(n),), generator=generator).tolist() for n in (3, 9, 1, 6, 12)]
    max_lens = [4, 11, 2, 7, 9]
    ours, ref = cached_greedy(model, sources, max_lens), greedy(model, sources, max_lens)
    for a, b in zip(ours, ref, strict=True):
        assert a.tokens == b.tokens
        assert a.score == pytest.approx(b.score, abs=1e-4)
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-4)


def test_trained_model_matches_reference(tiny_checkpoint: Path) -> None:
    model, _, _ = load_model(tiny_checkpoint)
    generator = torch.Generator().manual_seed(11)
    sources = [torch.randint(4, model.config.vocab_size, (int(n),), generator=generator).tolist() for n in range(1, 13)]
    max_lens = [len(s) + 5 for s in sources]
    ours, ref = cached_greedy(model, sources, max_lens), greedy(model, sources, max_lens)
    assert [o.tokens for o in ours] == [r.tokens for r in ref]
    assert any(o.tokens[-1] == model.config.eos_id for o in ours)  # some stop by themselves, some run out
