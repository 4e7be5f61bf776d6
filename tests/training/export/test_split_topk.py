"""A split top-k (``export --gpu-topk split``, training/incremental.py ``split_topk``): the decoder steps take their
top-k in two rounds over slices of the vocabulary, and must return exactly what one TopK returns, ties included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from inference.engine import gpu_present
from training.config import ModelConfig
from training.export.common import ExportError
from training.export.trace import trace_graphs
from training.incremental import decoder_example, spec, topk_chunks
from training.model import Transformer


def test_the_vocabulary_splits_into_slices_wider_than_any_k() -> None:
    assert topk_chunks(8000, 256) == 10  # slices of 800 pieces
    assert topk_chunks(16000, 256) == 16
    assert topk_chunks(2048, 64) == 4  # no slice under 512 pieces
    assert topk_chunks(1000, 256) == 1  # 500-piece slices would be too narrow: no split
    assert topk_chunks(7919, 256) == 1  # a prime: no equal slices
    assert 8000 // topk_chunks(8000, 480) >= 512  # at least the widest k of a step (2 * 16 + 480), rounded up
    assert topk_chunks(16000, 512) == 10  # 1,600-piece slices: 16 slices of 1,000 would be under 1,024


TIED = [100, 700, 1300, 1900]  # one in each of the 4 slices of 512: 100 and 1900 tied first, 700 and 1300 second


def _traced(attention: str, directory: Path) -> tuple[Transformer, Path, Path]:
    """A model of 2,048 pieces whose best scores are tied across slices, traced with one top-k and split."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=2048, d_model=32, n_heads=4, d_ff=64, encoder_layers=1, decoder_layers=2, max_positions=64,
        final_logits_bias=True,
    )  # fmt: skip
    model = Transformer(config).eval()
    with torch.no_grad():
        model.embed_tokens.weight[TIED] = model.embed_tokens.weight[TIED[0]].clone()
        model.final_logits_bias[TIED] = 50.0  # the best scores, exactly equal
        model.final_logits_bias[TIED[1:3]] = 49.0
    for kind in ("one", "split"):
        (directory / kind).mkdir()
        with torch.no_grad():
            trace_graphs(model, directory / kind, 17, -1, static=True, attention=attention, topk=kind)
    return model, directory / "one", directory / "split"


def _compare(model: Transformer, one_dir: Path, split_dir: Path, providers: list[str]) -> None:
    """Every output of the decoder step and the static step, one top-k against split, for several k."""
    for role, example in (
        ("decoder", decoder_example(model, batch=3, hyps=2, src_len=5, step=4)),
        ("static_decoder", decoder_example(model, batch=3, hyps=2, src_len=5, step=6)),
    ):
        contract = spec(role, model)
        one, split = (ort.InferenceSession(str(d / f"{role}.onnx"), providers=providers) for d in (one_dir, split_dir))
        for k in (1, 2, 5, 40):
            feeds = {name: t.numpy() for name, t in zip(contract.input_names, example, strict=True)}
            feeds["k"] = np.array([k], dtype=np.int64)
            expected, got = one.run(None, feeds), split.run(None, feeds)
            for name, a, b in zip(contract.output_names, expected, got, strict=True):
                np.testing.assert_array_equal(b, a, err_msg=f"{role}.{name} k={k}")
            top_ids = expected[contract.output_names.index("topk_ids")]
            if k >= 4:  # each tied pair in id order, as onnxruntime's TopK orders ties
                assert (top_ids[..., :4] == np.array([100, 1900, 700, 1300])).all(), top_ids[..., :4]


@pytest.mark.parametrize("attention", ["plain", "fused"])
def test_split_steps_return_what_one_topk_returns(attention: str, tmp_path: Path) -> None:
    model, one_dir, split_dir = _traced(attention, tmp_path)
    split = onnx.load(str(split_dir / "static_decoder.onnx"), load_external_data=False)
    assert sum(n.op_type == "TopK" for n in split.graph.node) == 2
    _compare(model, one_dir, split_dir, ["CPUExecutionProvider"])


@pytest.mark.gpu
@pytest.mark.skipif(
    not ("CUDAExecutionProvider" in ort.get_available_providers() and gpu_present()),
    reason="needs onnxruntime's CUDA provider and an NVIDIA GPU",
)
def test_split_steps_return_what_one_topk_returns_on_cuda(tmp_path: Path) -> None:
    """onnxruntime's CUDA TopK takes other paths for a row of slices than for a whole row (docs/inference-core.md):
    the same values and ids there too."""
    model, one_dir, split_dir = _traced("fused", tmp_path)
    _compare(model, one_dir, split_dir, ["CUDAExecutionProvider", "CPUExecutionProvider"])


def test_a_split_topk_needs_a_gpu_set(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from training.export import export_bundle

    with pytest.raises(ExportError, match="--gpu-topk"):
        export_bundle(tiny_checkpoint, tmp_path / "b", gpu_topk="split")
