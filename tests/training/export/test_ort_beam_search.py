"""onnxruntime's own BeamSearch operator over our encoder and decoder (training/export/ort_beam_search.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from core.translation import DecodeOptions
from inference.engine import Engine
from testkit.synthetic import make_pairs
from training.checkpoint import load_model
from training.export.ort_beam_search import export_beam_search, run_beam_search

TEXTS = [source for source, _ in make_pairs(24, seed=9, min_len=1, max_len=8)]


@pytest.fixture(scope="module")
def operator(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> ort.InferenceSession:
    path = export_beam_search(load_model(tiny_checkpoint)[0], tmp_path_factory.mktemp("ort-beam") / "search.onnx")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_the_operator_scores_its_outputs_as_the_pytorch_model_does(
    operator: ort.InferenceSession, tiny_checkpoint: Path, tiny_bundle: Path
) -> None:
    """Whatever its search rules pick, each returned hypothesis' score must be what the PyTorch model gives that
    sequence (teacher-forced log-probabilities, summed, over its length counting the start token, as onnxruntime
    does): the subgraphs compute the model, positions and cache included."""
    import torch

    from training.decode import next_logprobs, source_tensor

    model = load_model(tiny_checkpoint)[0].eval()
    engine = Engine.load(tiny_bundle, provider="cpu", threads=1)
    sources = [engine.tokenize(t) for t in TEXTS]
    for beam in (1, 4):
        tokens, scores = run_beam_search(operator, engine, sources, beam=beam, max_length=20, with_scores=True)
        checked = 0
        for source, out, score in zip(sources, tokens, scores, strict=True):
            src = source_tensor(model, [source])
            memory = model.encode(src)
            prefix = [model.config.bos_id, *out, engine.eos_id]
            with torch.no_grad():
                total = sum(
                    float(next_logprobs(model, memory, src, torch.tensor([prefix[:i]]))[0, prefix[i]])
                    for i in range(1, len(prefix))
                )
            assert score == pytest.approx(total / (len(prefix) - 1), abs=1e-3), (beam, source, out)
            checked += 1
        assert checked == len(sources)
    assert len({tuple(t) for t in tokens}) > len(tokens) // 2  # real, varied outputs


def test_four_beams_mostly_agree_with_ours(operator: ort.InferenceSession, tiny_bundle: Path) -> None:
    """Beam 4: the operator keeps Hugging Face's rules (an EOS counts only among the best ``beam`` candidates),
    ours is the reference decoder's, so some outputs differ; most must not."""
    engine = Engine.load(tiny_bundle, provider="cpu", threads=1)
    sources = [engine.tokenize(t) for t in TEXTS]
    got = run_beam_search(operator, engine, sources, beam=4, max_length=20)
    ours = engine.translate_ids(sources, DecodeOptions(beam_size=4, max_length=20, max_length_ratio=1e6))
    same = sum(a == b.best.token_ids for a, b in zip(got, ours, strict=True))
    assert same >= 0.7 * len(sources)
    assert all(np.all(np.array(t) != engine.eos_id) for t in got)
