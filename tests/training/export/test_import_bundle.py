"""import-bundle (a bundle's graphs back to a checkpoint) and train.init (continue training from one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from core.tokenizer import Tokenizer
from testkit.tiny import tiny_config
from training import checkpoint
from training.config import Config, ModelConfig
from training.export import export_bundle
from training.export.import_bundle import ImportError_, import_bundle
from training.model import Transformer
from training.train import Trainer, inverse_sqrt, train


def _params(path: Path) -> dict[str, torch.Tensor]:
    model, _, _ = checkpoint.load_model(path)
    return {name: p.detach() for name, p in model.named_parameters()}


def test_fp32_bundle_imports_to_the_exported_weights_exactly(tiny_checkpoint: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    export_bundle(tiny_checkpoint, bundle, name="tiny")
    out = tmp_path / "imported.pt"
    done = subprocess.run(
        [sys.executable, "-m", "training", "import-bundle", str(bundle), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(done.stdout)
    assert summary["weights"] == "fp32" and summary["parity"]["random"]["max_abs_diff"] < 1e-3
    original, imported = _params(tiny_checkpoint), _params(out)
    assert original.keys() == imported.keys()
    for name, value in original.items():
        assert torch.equal(imported[name], value), name
    assert checkpoint.load(out)["vocab_files"] == checkpoint.load(tiny_checkpoint)["vocab_files"]
    assert "train_state" not in checkpoint.load(out)  # weights only: a start for train.init, not a resume point


def test_other_shapes_untied_output_and_post_norm(tiny_vocab: Path, tmp_path: Path) -> None:
    """Three encoder layers, one decoder layer, a separate output projection: every parameter found again."""
    cfg = ModelConfig(
        vocab_size=len(Tokenizer(tiny_vocab)), d_model=32, n_heads=2, d_ff=48, encoder_layers=3, decoder_layers=1,
        max_positions=64, tie_embeddings=False, pre_norm=False,
    )  # fmt: skip
    torch.manual_seed(3)
    model = Transformer(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))  # biases and norms off their initial constants
    source = tmp_path / "random.pt"
    checkpoint.save(
        source,
        {
            "config": Config(model=cfg).to_dict(),
            "model": model.state_dict(),
            "vocab_files": checkpoint.read_vocab_files(tiny_vocab),
        },
    )
    export_bundle(source, tmp_path / "bundle")
    import_bundle(tmp_path / "bundle", tmp_path / "back.pt")
    original, imported = _params(source), _params(tmp_path / "back.pt")
    assert "output_proj.weight" in original
    for name, value in original.items():
        assert torch.equal(imported[name], value), name


@pytest.mark.parametrize("quantize", ["int8-channel", "int8-static"])
def test_int8_bundle_imports_within_one_quantization_step(tiny_checkpoint: Path, tmp_path: Path, quantize: str) -> None:
    bundle = tmp_path / "int8"
    export_bundle(tiny_checkpoint, bundle, quantize=quantize, tolerance=10.0, calibration_sentences=32)
    import_bundle(bundle, tmp_path / "imported.pt")
    original, imported = _params(tiny_checkpoint), _params(tmp_path / "imported.pt")
    scales = [
        numpy_helper.to_array(init)
        for role in ("encoder.onnx", "decoder.onnx")
        for init in onnx.load(str(bundle / role)).graph.initializer
        if init.name.endswith("_scale") and init.name.startswith("onnx::MatMul")
    ]
    assert scales, "the int8 bundle has no quantized weights"
    step = max(float(s.max()) for s in scales)
    changed = 0
    for name, value in original.items():
        error = float((imported[name] - value).abs().max())
        if value.dim() == 2 and name != "embed_tokens.weight":  # quantized matrices (the embedding stays float)
            assert error <= step / 2 + 1e-6, (name, error, step)
            changed += error > 0
        else:
            assert error == 0, name
    assert changed > 0  # it did read the int8 values, not some float copy


def test_a_bundle_with_a_final_logits_bias_is_refused(tiny_bundle: Path, tmp_path: Path) -> None:
    manifest = json.loads((tiny_bundle / "manifest.json").read_text())
    manifest["architecture"]["final_logits_bias"] = True
    copy = tmp_path / "bundle"
    copy.mkdir()
    for f in tiny_bundle.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ImportError_, match="final logits bias"):
        import_bundle(copy, tmp_path / "x.pt")


def test_train_init_starts_from_the_checkpoint(
    tiny_checkpoint: Path, synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    # lr 0: Adam moves nothing, so the run's weights after its steps are exactly the init's.
    cfg = tiny_config(*synthetic_corpus, tiny_vocab, steps=3, init=str(tiny_checkpoint), lr=0.0, lr_offset=1000)
    train(cfg, tmp_path / "run")
    start, after = _params(tiny_checkpoint), _params(tmp_path / "run" / "last.pt")
    for name, value in start.items():
        assert torch.equal(after[name], value), name


def test_train_init_refuses_another_architecture_or_vocabulary(
    tiny_checkpoint: Path, synthetic_corpus: tuple[Path, Path], tiny_vocab: Path, tmp_path: Path
) -> None:
    cfg = tiny_config(*synthetic_corpus, tiny_vocab, steps=1, init=str(tiny_checkpoint))
    cfg.model.d_ff = 256
    with pytest.raises(checkpoint.CheckpointError, match="d_ff 128 .ours 256."):
        train(cfg, tmp_path / "arch")
    other_vocab = tmp_path / "vocab"
    other_vocab.mkdir()
    for f in tiny_vocab.iterdir():
        (other_vocab / f.name).write_bytes(f.read_bytes())
    table = json.loads((other_vocab / "vocab.json").read_text())
    (other_vocab / "vocab.json").write_text(json.dumps(table, indent=1))  # other bytes, same table: accepted
    cfg = tiny_config(*synthetic_corpus, other_vocab, steps=1, init=str(tiny_checkpoint), lr=0.0)
    train(cfg, tmp_path / "same-run")
    pieces = table["pieces"]
    pieces[5], pieces[6] = pieces[6], pieces[5]  # two ids swapped: the embeddings would mean other pieces
    (other_vocab / "vocab.json").write_text(json.dumps(table))
    cfg = tiny_config(*synthetic_corpus, other_vocab, steps=1, init=str(tiny_checkpoint))
    with pytest.raises(checkpoint.CheckpointError, match="vocabulary"):
        train(cfg, tmp_path / "vocab-run")


def test_the_schedule_warms_up_to_where_the_init_left_it(synthetic_corpus: tuple[Path, Path], tiny_vocab: Path) -> None:
    cfg = tiny_config(*synthetic_corpus, tiny_vocab, lr_offset=5000)
    trainer = Trainer(cfg, "unused")
    warmup, d_model, scale = cfg.train.warmup_steps, cfg.model.d_model, cfg.train.lr
    assert trainer.lr(warmup) == pytest.approx(inverse_sqrt(warmup + 5000, d_model, warmup, scale))
    assert trainer.lr(warmup // 2) == pytest.approx(0.5 * inverse_sqrt(warmup // 2 + 5000, d_model, warmup, scale))
    assert trainer.lr(3 * warmup) == pytest.approx(inverse_sqrt(3 * warmup + 5000, d_model, warmup, scale))
    assert np.isclose(trainer.lr(1), inverse_sqrt(5001, d_model, warmup, scale) / warmup)


def test_fp16_bundle_imports_within_half_precision(tiny_checkpoint: Path, tmp_path: Path) -> None:
    export_bundle(tiny_checkpoint, tmp_path / "fp16", dtype="fp16")
    summary = import_bundle(tmp_path / "fp16", tmp_path / "imported.pt")
    assert summary["weights"] == "fp16"
    original, imported = _params(tiny_checkpoint), _params(tmp_path / "imported.pt")
    for name, value in original.items():
        assert imported[name].dtype == torch.float32
        assert torch.allclose(imported[name], value, rtol=2**-10, atol=1e-6), name  # fp16 keeps 11 bits
        # exactly the rounded weights, or the weights themselves where the graph kept float32 (LayerNorm)
        assert torch.equal(imported[name], value.half().float()) or torch.equal(imported[name], value), name


def test_the_gpu_set_imports_to_its_half_precision_weights(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """``--graphs cuda``: the weights of an fp16w GPU set (fp16 initializers widened by Casts), not the int8 main
    graphs': the shipped bundles' closest copy of their float model."""
    bundle = tmp_path / "dual"
    export_bundle(tiny_checkpoint, bundle, quantize="int8-channel", tolerance=3.0, gpu_dtype="fp16w")
    summary = import_bundle(bundle, tmp_path / "gpu.pt", graphs="cuda")
    assert (summary["graphs"], summary["weights"]) == ("cuda", "fp16w")
    original, imported = _params(tiny_checkpoint), _params(tmp_path / "gpu.pt")
    for name, value in original.items():
        assert torch.equal(imported[name], value.half().float()) or torch.equal(imported[name], value), name
    with pytest.raises(ImportError_, match="no 'rocm' graph set"):
        import_bundle(bundle, tmp_path / "none.pt", graphs="rocm")


def test_a_bundle_whose_step_was_traced_with_other_node_numbers_imports_the_same(
    tiny_checkpoint: Path, tmp_path: Path
) -> None:
    """The tracer names folded constants by their place in the graph (``onnx::MatMul_392``). A bundle exported
    before a change to the decoder step numbers them otherwise (the shipped en→de: 411 where today's trace says
    392); the importer pairs them in order."""
    import re

    from core.bundle import read_manifest, sha256_file

    bundle = tmp_path / "bundle"
    export_bundle(tiny_checkpoint, bundle, name="tiny", quantize="int8-channel", tolerance=3.0)
    direct = import_bundle(bundle, tmp_path / "direct.pt")
    path = bundle / "decoder.onnx"
    model = onnx.load(str(path))
    names = {i.name for i in model.graph.initializer}
    shifted = {
        n: re.sub(r"_(\d+)(_quantized|_scale|_zero_point)?$", lambda m: f"_{int(m.group(1)) + 19}{m.group(2) or ''}", n)
        for n in names
        if n.startswith("onnx::")
    }
    assert shifted, "the decoder has numbered constants"
    for init in model.graph.initializer:
        init.name = shifted.get(init.name, init.name)
    for node in model.graph.node:
        node.input[:] = [shifted.get(i, i) for i in node.input]
    onnx.save(model, str(path))
    manifest = read_manifest(bundle, verify=False)
    manifest["files"]["decoder.onnx"].update(bytes=path.stat().st_size, sha256=sha256_file(path))
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    import_bundle(bundle, tmp_path / "shifted.pt")
    assert direct["parity"]
    first, second = _params(tmp_path / "direct.pt"), _params(tmp_path / "shifted.pt")
    assert all(torch.equal(first[name], second[name]) for name in first)
