"""Turn an exported model bundle back into a checkpoint.

A bundle is what ships and what a server holds; the checkpoint it came from is often gone. Importing the bundle
gives a weights-only checkpoint that ``train --set train.init=CKPT`` continues training from (new data, a new
domain, more steps) and that ``export`` re-exports.

How the weights are found: the exporter folds several parameters into one constant (the query/key/value
projections into one matrix, the cross-attention keys and values of every decoder layer into another) and
transposes them. Rather than restating those rules, the importer exports a model of the same architecture with
random weights through the same exporter, learns which slice of which constant holds which parameter by
comparing values, and reads the same slices from the bundle. int8 bundles are dequantized (weight = (q - zero
point) x scale, per matrix or per column), so their import is the int8 model, not the float one it came from;
fp16 bundles are widened to float32. The result is checked against the bundle with the export's parity check.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from core.bundle import DECODER_FILE, ENCODER_FILE, read_manifest
from core.tokenizer import Tokenizer
from training.checkpoint import read_vocab_files, save
from training.config import Config, ModelConfig
from training.export.common import TOLERANCES, ExportError
from training.export.parity import check_parity
from training.export.trace import trace_graphs
from training.model import Transformer

log = logging.getLogger(__name__)


class ImportError_(ExportError):  # noqa: N801 - not the builtin ImportError
    """The bundle cannot be turned back into a checkpoint; the message says why."""


def model_config(manifest: dict[str, Any]) -> ModelConfig:
    """The ModelConfig a bundle's manifest describes."""
    arch, ids = manifest["architecture"], manifest["special_ids"]
    if arch.get("type") != "transformer-encoder-decoder":
        raise ImportError_(f"architecture type {arch.get('type')!r} is not one this importer knows")
    return ModelConfig(
        vocab_size=arch["vocab_size"],
        d_model=arch["d_model"],
        n_heads=arch["n_heads"],
        d_ff=arch["d_ff"],
        encoder_layers=arch["encoder_layers"],
        decoder_layers=arch["decoder_layers"],
        activation=arch["activation"],
        pre_norm=arch["pre_norm"],
        max_positions=arch["max_positions"],
        positional_layout=arch["positional_layout"],
        tie_embeddings=arch["tie_embeddings"],
        scale_embeddings=arch["scale_embeddings"],
        final_logits_bias=arch["final_logits_bias"],
        pad_id=ids["pad"],
        unk_id=ids["unk"],
        bos_id=ids["bos"],
        eos_id=ids["eos"],
    )


def import_bundle(
    bundle_dir: str | Path, out: str | Path, *, check: bool = True, graphs: str = "main"
) -> dict[str, Any]:
    """Write the weights of the bundle at ``bundle_dir`` as a checkpoint ``out``; returns a summary. ``graphs``:
    which graph set to read them from, "main" or a variant's name ("cuda"): the shipped bundles' GPU set holds
    fp16 weights, closer to the float model than their int8 main graphs."""
    root = Path(bundle_dir)
    manifest = read_manifest(root)
    if graphs != "main":
        variant = manifest.get("variants", {}).get(graphs)
        if variant is None:
            raise ImportError_(
                f"{root} has no {graphs!r} graph set (it has: main, {', '.join(manifest.get('variants', {}))})"
            )
    bundle = root if graphs == "main" else root / graphs
    cfg = model_config(manifest)
    if cfg.final_logits_bias:
        raise ImportError_(
            f"{bundle}: the model has a final logits bias, which the decoder graph folds together with the search's "
            "masks; import such models from their Marian directory (import-marian) instead"
        )
    vocab_files = read_vocab_files(root)
    model = Transformer(cfg)
    reference = Transformer(cfg)  # random weights: its export shows where each parameter lands
    with torch.no_grad():
        for param in reference.parameters():  # LayerNorm ones and zero biases would all look alike
            param.copy_(torch.randn_like(param))
    export = manifest["export"]
    with tempfile.TemporaryDirectory(prefix="import-bundle-") as tmp:
        attention = export.get("attention", "plain")  # bundles before it were all plain
        if graphs != "main":
            attention = manifest["variants"][graphs].get("attention", "plain")
        trace_graphs(
            reference,
            Path(tmp),
            export["opset"],
            export["attention_layer"],
            attention=attention,
            # as the set was traced: GPU sets exported since 2026-11-26 keep the encoder's padding
            pack_encoder=graphs == "main" or manifest["variants"][graphs].get("encoder") != "padded",
        )
        found: dict[str, torch.Tensor] = {}
        for role in (ENCODER_FILE, DECODER_FILE):
            found.update(_weights_of(onnx.load(str(Path(tmp) / role)), onnx.load(str(bundle / role)), reference, role))
    expected = dict(model.named_parameters())
    missing = sorted(set(expected) - set(found))
    if missing:
        raise ImportError_(f"{bundle}: no value found for {missing}; was it exported by another version?")
    with torch.no_grad():
        for name, param in expected.items():
            if found[name].shape != param.shape:
                raise ImportError_(
                    f"{bundle}: {name} has shape {tuple(found[name].shape)}, expected {tuple(param.shape)}"
                )
            param.copy_(found[name])
    model.eval()
    mode = "int8" if export.get("quantize", "none").startswith("int8") else export.get("dtype", "fp32")
    if graphs != "main":
        mode = manifest["variants"][graphs]["dtype"]
    parity: dict[str, Any] = {}
    if check:  # the bundle itself is the reference: the imported model must compute what it computes
        tolerance = 3.0 if mode == "int8" else TOLERANCES[mode]
        parity = check_parity(model, bundle, Tokenizer(root), None, export["attention_layer"], mode, tolerance)
    save(out, {"config": Config(model=cfg).to_dict(), "model": model.state_dict(), "vocab_files": vocab_files})
    log.info("imported %s (%s %s, %s) into %s", bundle, manifest["name"], manifest["version"], mode, out)
    return {
        "checkpoint": str(out),
        "bundle": str(root),
        "graphs": graphs,
        "name": manifest["name"],
        "version": manifest["version"],
        "weights": mode,
        "parameters": sum(p.numel() for p in model.parameters()),
        "parity": parity,
    }


def _initializers(graph: onnx.ModelProto) -> dict[str, np.ndarray]:
    values = {init.name: numpy_helper.to_array(init) for init in graph.graph.initializer}
    for node in graph.graph.node:  # fp16w graphs: an fp16 initializer, widened by a Cast under the original name
        if node.op_type == "Cast" and node.input and node.input[0] in values and node.output[0] not in values:
            values[node.output[0]] = values[node.input[0]].astype(np.float32)
    return values


def _value(target: dict[str, np.ndarray], name: str, role: str) -> np.ndarray:
    """Initializer ``name`` of the bundle as float32, dequantized if the quantizer replaced it."""
    if name in target:
        return target[name].astype(np.float32)
    if name + "_quantized" in target:
        q = target[name + "_quantized"].astype(np.float32)
        scale = target[name + "_scale"].astype(np.float32)
        zero = target[name + "_zero_point"].astype(np.float32)
        return (q - zero) * scale  # per matrix: scalars; per column: one entry per output column
    raise ImportError_(f"{role}: the bundle has no initializer {name!r}; was it exported by another version?")


def _weights_of(
    fresh: onnx.ModelProto, bundle: onnx.ModelProto, reference: Transformer, role: str
) -> dict[str, torch.Tensor]:
    """Parameter name -> value, read from ``bundle`` at the places ``fresh`` (the reference's export) shows."""
    params = {f"model.{name}": param for name, param in reference.named_parameters()}  # as the graphs name them
    fresh_values, target = _initializers(fresh), _initializers(bundle)
    target = {**target, **{ours: target[theirs] for ours, theirs in _numbered(fresh_values, target).items()}}
    found: dict[str, torch.Tensor] = {}
    exact: set[str] = set()
    for name, value in fresh_values.items():  # parameters the exporter kept as they are
        if name in params and tuple(value.shape) == tuple(params[name].shape):
            found[name] = torch.from_numpy(_value(target, name, role).copy())
            exact.add(name)
    # Columns of every weight matrix: key = a column of some parameter's transpose, exactly as exported.
    columns: dict[bytes, tuple[str, int]] = {}
    for name, param in params.items():
        if param.dim() == 2 and name.endswith("weight"):
            columns.setdefault(param.detach().numpy()[0].tobytes(), (name, param.shape[0]))
    biases = _added_constants(fresh, fresh_values)
    for node in fresh.graph.node:  # the reference's graphs are float32: every weight product is a MatMul
        if node.op_type != "MatMul" or node.input[1] not in fresh_values:
            continue
        weight_name = node.input[1]
        parts = _column_parts(fresh_values[weight_name], params, columns, role, weight_name)
        if all(name in exact for name, _ in parts):
            continue  # e.g. the tied output projection: the embedding was read as it is
        value = _value(target, weight_name, role)
        bias_name = biases.get(node.output[0])
        bias = _value(target, bias_name, role) if bias_name and bias_name not in params else None
        start = 0
        for param_name, width in parts:
            if param_name not in exact:
                found[param_name] = torch.from_numpy(np.ascontiguousarray(value[:, start : start + width].T))
            if bias is not None:
                bias_param = param_name.removesuffix("weight") + "bias"
                if bias_param in params and bias_param not in exact:
                    found[bias_param] = torch.from_numpy(bias[start : start + width].copy())
            start += width
    # Biases a kernel adds itself (fused graphs: the attention's query/key/value biases, one concatenated
    # constant): each vector constant that is parameters side by side.
    firsts = {p.detach().numpy()[:1].tobytes(): name for name, p in params.items() if p.dim() == 1 and len(p)}
    for name, vector in fresh_values.items():
        if vector.ndim != 1 or name in params or vector.dtype != np.float32:
            continue
        pieces: list[tuple[str, int, int]] = []
        start = 0
        while start < len(vector) and vector[start : start + 1].tobytes() in firsts:
            piece = firsts[vector[start : start + 1].tobytes()]
            width = len(params[piece])
            if not np.array_equal(vector[start : start + width], params[piece].detach().numpy()):
                break
            pieces.append((piece, start, width))
            start += width
        if start != len(vector) or all(piece in found for piece, _, _ in pieces):
            continue
        value = _value(target, name, role)
        for piece, start, width in pieces:
            found.setdefault(piece, torch.from_numpy(value[start : start + width].copy()))
    return {name.removeprefix("model."): value for name, value in found.items()}


_SUFFIXES = ("_quantized", "_scale", "_zero_point", "_fp16")


def _numbered(fresh: dict[str, np.ndarray], target: dict[str, np.ndarray]) -> dict[str, str]:
    """The bundle's names for the fresh export's numbered constants (``onnx::MatMul_392``): the tracer numbers them
    by their place in the graph, so a bundle exported by an earlier version of the step (fewer or more nodes before
    them) numbers the same constants differently, in the same order. Per kind, the n-th of the fresh export is the
    n-th of the bundle, where both hold as many; the quantizer's and fp16w's suffixes come along."""

    def numbered(names: Iterable[str]) -> dict[str, list[tuple[int, str]]]:
        kinds: dict[str, list[tuple[int, str]]] = {}
        for name in names:
            match = re.fullmatch(r"(onnx::\w+?)_(\d+)", name)
            if match:
                kinds.setdefault(match.group(1), []).append((int(match.group(2)), name))
        return {kind: sorted(found) for kind, found in kinds.items()}

    bases = {name.removesuffix(suffix) for name in target for suffix in ("", *_SUFFIXES) if name.endswith(suffix)}
    ours, theirs = numbered(fresh), numbered(bases)
    renamed: dict[str, str] = {}
    for kind, names in ours.items():
        if [n for _, n in names] == [n for _, n in theirs.get(kind, [])] or len(names) != len(theirs.get(kind, [])):
            continue  # the same names, or no way to pair them: looked up as they are
        for (_, mine), (_, bundle_name) in zip(names, theirs[kind], strict=True):
            for suffix in ("", *_SUFFIXES):
                if bundle_name + suffix in target:
                    renamed[mine + suffix] = bundle_name + suffix
    return renamed


def _column_parts(
    matrix: np.ndarray,
    params: dict[str, torch.nn.Parameter],
    columns: dict[bytes, tuple[str, int]],
    role: str,
    what: str,
) -> list[tuple[str, int]]:
    """Which parameters' transposes, side by side, make up ``matrix``."""
    parts: list[tuple[str, int]] = []
    start = 0
    while start < matrix.shape[1]:
        key = np.ascontiguousarray(matrix[:, start]).tobytes()
        if key not in columns:
            raise ImportError_(f"{role}: columns {start}.. of {what} match no parameter of the architecture")
        name, width = columns[key]
        expected = params[name].detach().numpy().T
        if not np.array_equal(matrix[:, start : start + width], expected):
            raise ImportError_(f"{role}: {what} holds part of {name} but not all of it")
        parts.append((name, width))
        start += width
    return parts


def _added_constants(graph: onnx.ModelProto, initializers: dict[str, np.ndarray]) -> dict[str, str]:
    """Output name -> the constant an Add node adds to it (a product's bias)."""
    added: dict[str, str] = {}
    for node in graph.graph.node:
        if node.op_type == "Add":
            constants = [name for name in node.input if name in initializers]
            for name in node.input:
                if constants and name not in initializers:
                    added.setdefault(name, constants[0])
    return added
