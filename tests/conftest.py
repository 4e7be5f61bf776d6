"""Shared fixtures: a synthetic corpus, its vocabulary, a trained tiny checkpoint and its bundle.

Building them costs about a minute on 2 cores, so they are session-scoped and shared by the training,
export, engine and service tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.synthetic import write_corpus
from testkit.tiny import tiny_config


@pytest.fixture(scope="session")
def synthetic_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def tiny_vocab(synthetic_corpus: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.vocab import train_vocab

    out = tmp_path_factory.mktemp("vocab")
    train_vocab(synthetic_corpus[0], out, vocab_size=96)
    return out


@pytest.fixture(scope="session")
def tiny_checkpoint(
    synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A tiny model trained on the reversal task until it is nearly perfect."""
    from training.train import train

    run = tmp_path_factory.mktemp("tiny-run")
    train(tiny_config(*synthetic_corpus, tiny_vocab), run)
    return run / "last.pt"


@pytest.fixture(scope="session")
def tiny_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint exported to an fp32 ONNX bundle."""
    export = pytest.importorskip("training.export", reason="training.export is not written yet")
    out = tmp_path_factory.mktemp("bundles") / "tiny"
    export.export_bundle(
        tiny_checkpoint, out, name="tiny-reverse", version="1", source_language="en", target_language="de"
    )
    return out


def _export_tiny(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory, name: str, **how: object) -> Path:
    from training.export import export_bundle

    out = tmp_path_factory.mktemp("bundles") / name
    meta = {"name": "tiny-reverse", "version": "1", "source_language": "en", "target_language": "de"}
    export_bundle(checkpoint, out, **meta, **how)  # type: ignore[arg-type]
    return out


@pytest.fixture(scope="session")
def tiny_static_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint exported with a GPU set (fp32, plain attention: ``tiny_fused_bundle`` has the GPU set's
    default, fused) that has the static-shape graphs (``--static-step``)."""
    how = {"gpu_dtype": "fp32", "gpu_attention": "plain", "static_step": True}
    return _export_tiny(tiny_checkpoint, tmp_path_factory, "tiny-static", **how)


@pytest.fixture(scope="session")
def tiny_masked_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint exported with the masked step (caches that never move, core/graphs.py ``MASKED_STEP``)
    in its main graphs (plain attention) and in a GPU set (fp32, fused attention)."""
    how = {"gpu_dtype": "fp32", "gpu_attention": "fused", "masked_step": True}
    return _export_tiny(tiny_checkpoint, tmp_path_factory, "tiny-masked", **how)


@pytest.fixture(scope="session")
def tiny_fused_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint exported with fused attention (onnxruntime's MultiHeadAttention and
    SkipLayerNormalization kernels, training/fused.py) in its main graphs and in a GPU set (fp32) that has the
    static-shape graphs."""
    how = {"attention": "fused", "gpu_dtype": "fp32", "gpu_attention": "fused", "static_step": True}
    return _export_tiny(tiny_checkpoint, tmp_path_factory, "tiny-fused", **how)


@pytest.fixture(scope="session")
def tiny_static_masked_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint exported with a GPU set (fp32, fused attention) whose static step attends to its own cache
    with onnxruntime's DecoderMaskedMultiHeadAttention (``--static-attention decoder-masked``)."""
    how = {"gpu_dtype": "fp32", "gpu_attention": "fused", "static_step": True, "static_attention": "decoder-masked"}
    return _export_tiny(tiny_checkpoint, tmp_path_factory, "tiny-static-masked", **how)
