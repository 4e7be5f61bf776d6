"""bench/noisy_channel.py's reverse scores: padded, batched teacher forcing gives each pair the log-probability a
step-by-step decode of that pair alone gives."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_batched_teacher_forcing_matches_one_pair_step_by_step(
    tiny_checkpoint: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    from bench.noisy_channel import reverse_scores
    from training.checkpoint import load_model, load_tokenizer

    model, config, vocab = load_model(tiny_checkpoint)
    tokenizer = load_tokenizer(vocab, tmp_path / "vocab")
    lines = Path(synthetic_corpus[0]).read_text(encoding="utf-8").splitlines()[:5]
    pairs = [(line.split("\t")[0], line.split("\t")[1]) for line in lines]
    pairs.append((pairs[0][0], pairs[1][1] + " " + pairs[2][1]))  # lengths differ: padding on both sides
    scores = reverse_scores(model, config.model, tokenizer, pairs)
    m = config.model
    for (first, second), (score, length) in zip(pairs, scores, strict=True):
        src = torch.tensor([tokenizer.encode_source(first) + [m.eos_id]])
        target = tokenizer.encode_target(second) + [m.eos_id]
        assert length == len(target)
        total, prefix = 0.0, [m.bos_id]
        with torch.inference_mode():
            memory = model.encode(src)
            for token in target:
                logits = model.decode(torch.tensor([prefix]), memory, src)[0][0, -1]
                total += float(logits.float().log_softmax(-1)[token])
                prefix.append(token)
        assert score == pytest.approx(total, abs=1e-3)
