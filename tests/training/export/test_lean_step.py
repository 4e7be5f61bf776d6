"""The lean decoder steps (core/graphs.py ``LEAN_STEP``, and ``STATIC_LEAN`` for the static step): written by exports
into a GPU set with fused attention, added to older bundles by ``python -m training lean-step``, and run by the engine
for the steps nobody asked attention rows for, with the same translations as the full step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from core.bundle import GRAPH_FILES, read_manifest, sha256_file, write_manifest
from core.graphs import LEAN_STEP, STATIC_LEAN
from core.translation import DecodeOptions
from inference.engine import Engine
from testkit.running import graph_runs
from testkit.synthetic import make_pairs
from training.__main__ import main as training_main

TEXTS = [source for source, _ in make_pairs(10, seed=11, min_len=2, max_len=6)]


def _graph(path: Path) -> onnx.GraphProto:
    return onnx.load(str(path), load_external_data=False).graph


def test_a_fused_gpu_set_gets_the_lean_step_and_a_plain_one_does_not(
    tiny_fused_bundle: Path, tiny_static_bundle: Path
) -> None:
    manifest = read_manifest(tiny_fused_bundle)
    graphs = manifest["variants"]["cuda"]["graphs"]
    entry = graphs[LEAN_STEP]
    assert entry["file"] == f"cuda/{GRAPH_FILES[LEAN_STEP]}" and manifest["files"][entry["file"]]["sha256"]
    assert set(entry["outputs"]) == set(graphs["decoder"]["outputs"]) - {"attention"}
    assert entry["inputs"] == graphs["decoder"]["inputs"]
    lean, full = _graph(tiny_fused_bundle / entry["file"]), _graph(tiny_fused_bundle / "cuda/decoder.onnx")
    assert len(lean.node) < len(full.node)
    # no weights of its own: every initializer it keeps is one of the decoder's, in the same file at the same place
    external = {t.name: [(e.key, e.value) for e in t.external_data] for t in full.initializer if t.external_data}
    kept = [t for t in lean.initializer if t.external_data]
    assert kept and all(external[t.name] == [(e.key, e.value) for e in t.external_data] for t in kept)
    assert LEAN_STEP not in read_manifest(tiny_static_bundle)["variants"]["cuda"]["graphs"]  # plain attention
    assert LEAN_STEP not in manifest["graphs"]  # the main graphs: the CPU gains nothing from it
    static = graphs[STATIC_LEAN]  # the static step's, the same way
    assert static["file"] == f"cuda/{GRAPH_FILES[STATIC_LEAN]}" and manifest["files"][static["file"]]["sha256"]
    assert set(static["outputs"]) == set(graphs["static_decoder"]["outputs"]) - {"attention"}
    assert static["inputs"] == graphs["static_decoder"]["inputs"]
    lean, full = _graph(tiny_fused_bundle / static["file"]), _graph(tiny_fused_bundle / "cuda/static_decoder.onnx")
    assert len(lean.node) < len(full.node)
    assert STATIC_LEAN not in read_manifest(tiny_static_bundle)["variants"]["cuda"]["graphs"]


def test_the_engine_steps_lean_only_where_nobody_asked_for_rows_and_translates_the_same(
    tiny_fused_bundle: Path,
) -> None:
    engine = Engine.load(tiny_fused_bundle, provider="cpu", threads=1, graphs="cuda", lean_step=True)
    full = Engine.load(tiny_fused_bundle, provider="cpu", threads=1, graphs="cuda")  # on the CPU: off by default
    assert LEAN_STEP in engine.sessions and LEAN_STEP not in full.sessions
    calls = graph_runs(engine)
    options = DecodeOptions(beam_size=3, n_best=2)
    lean_out = engine.translate(TEXTS, options)
    assert LEAN_STEP in calls and "decoder" not in calls
    for a, b in zip(lean_out, full.translate(TEXTS, options), strict=True):
        assert [(h.token_ids, h.score) for h in a.hypotheses] == [(h.token_ids, h.score) for h in b.hypotheses]
    calls.clear()
    rows = DecodeOptions(beam_size=3, return_attention=True)
    with_rows = engine.translate(TEXTS, rows)
    assert "decoder" in calls and LEAN_STEP not in calls
    for a, b in zip(with_rows, full.translate(TEXTS, rows), strict=True):
        assert a.best.token_ids == b.best.token_ids
        np.testing.assert_array_equal(np.array(a.best.attention), np.array(b.best.attention))


def test_one_sentence_asking_for_rows_takes_the_whole_set_to_the_full_step(tiny_fused_bundle: Path) -> None:
    engine = Engine.load(tiny_fused_bundle, provider="cpu", threads=1, graphs="cuda", lean_step=True)
    calls = graph_runs(engine)
    running = engine.running_set()
    running.admit([(0, TEXTS[0], DecodeOptions(beam_size=2)), (1, TEXTS[1], DecodeOptions(return_attention=True))])
    done: dict[Any, Any] = {}
    while running:
        done.update(running.step())
    assert "decoder" in calls
    assert done[1].best.attention is not None and done[0].best.attention is None


def test_the_command_adds_the_lean_steps_to_an_older_bundle(tiny_fused_bundle: Path, tmp_path: Path) -> None:
    older = tmp_path / "older"
    shutil.copytree(tiny_fused_bundle, older)
    manifest = json.loads((older / "manifest.json").read_text(encoding="utf-8"))
    for role in (LEAN_STEP, STATIC_LEAN):
        del manifest["variants"]["cuda"]["graphs"][role]
        (older / "cuda" / GRAPH_FILES[role]).unlink()
    write_manifest(older, {key: value for key, value in manifest.items() if key != "files"})
    assert LEAN_STEP not in Engine.load(older, provider="cpu", threads=1, graphs="cuda", lean_step=True).sessions
    static = Engine.load(older, provider="cpu", threads=1, graphs="cuda", static_step=True, lean_step=True)
    assert static.static_lean_path is None
    before = {name: entry["sha256"] for name, entry in read_manifest(older)["files"].items()}

    assert training_main(["lean-step", str(older)]) == 0

    after = read_manifest(older)  # verifies every checksum
    for role in (LEAN_STEP, STATIC_LEAN):
        assert (
            after["variants"]["cuda"]["graphs"][role]
            == read_manifest(tiny_fused_bundle)["variants"]["cuda"]["graphs"][role]
        )
        assert sha256_file(older / "cuda" / GRAPH_FILES[role]) == sha256_file(
            tiny_fused_bundle / "cuda" / GRAPH_FILES[role]
        )
    assert all(after["files"][name]["sha256"] == sha for name, sha in before.items())  # nothing else touched
    assert training_main(["lean-step", str(older)]) == 0  # again: the same files
    assert read_manifest(older)["files"] == after["files"]
    engine = Engine.load(older, provider="cpu", threads=1, graphs="cuda", lean_step=True)
    calls = graph_runs(engine)
    engine.translate(TEXTS[:2], DecodeOptions())
    assert LEAN_STEP in calls


def test_the_command_refuses_a_set_the_bundle_lacks(tiny_bundle: Path) -> None:
    from core.bundle import BundleError
    from training.export.lean import add_lean_step

    with pytest.raises(BundleError, match="no graph set 'cuda'"):
        add_lean_step(tiny_bundle, "cuda")


def test_the_check_refuses_a_lean_step_that_computes_otherwise(tiny_fused_bundle: Path, tmp_path: Path) -> None:
    from core.bundle import BundleError
    from training.export.lean import FP32_ATOL, check_lean, lean_graph

    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_fused_bundle, bundle)
    decoder = bundle / "cuda" / "decoder.onnx"
    model = lean_graph(decoder)
    for node in model.graph.node:  # the top-k's log-probabilities, scaled by 1.001 on their way out
        node.output[:] = ["unscaled" if name == "topk_logprobs" else name for name in node.output]
    scale = onnx.helper.make_tensor("scale", onnx.TensorProto.FLOAT, [], [1.001])
    model.graph.initializer.append(scale)
    model.graph.node.append(onnx.helper.make_node("Mul", ["unscaled", "scale"], ["topk_logprobs"]))
    wrong = bundle / "cuda" / "wrong_lean.onnx"  # beside the weights file its initializers point into
    onnx.save(model, str(wrong))
    manifest = read_manifest(bundle)
    check_lean(decoder, bundle / "cuda" / GRAPH_FILES[LEAN_STEP], manifest, FP32_ATOL)  # the right one passes
    with pytest.raises(BundleError, match="topk_logprobs differs"):
        check_lean(decoder, wrong, manifest, FP32_ATOL)
    static = bundle / "cuda" / "static_decoder.onnx"  # the static step, its top-k packed: the same check
    model = lean_graph(static)
    for node in model.graph.node:
        node.output[:] = ["unscaled" if name == "topk" else name for name in node.output]
    model.graph.initializer.append(scale)
    model.graph.node.append(onnx.helper.make_node("Mul", ["unscaled", "scale"], ["topk"]))
    onnx.save(model, str(wrong))
    check_lean(static, bundle / "cuda" / GRAPH_FILES[STATIC_LEAN], manifest, FP32_ATOL)
    with pytest.raises(BundleError, match="topk_logprobs differs"):
        check_lean(static, wrong, manifest, FP32_ATOL)


def test_static_running_sets_step_lean_where_nobody_asked_for_rows_and_translate_the_same(
    tiny_fused_bundle: Path,
) -> None:
    """A static running set binds the lean static step and the full one to the same buffers and takes either step
    by step: where nobody asks for rows only the lean one is ever opened; rows asked open the full one too; the
    translations and rows are the full step's."""
    lean = Engine.load(tiny_fused_bundle, provider="cpu", threads=1, graphs="cuda", static_step=True, lean_step=True)
    full = Engine.load(tiny_fused_bundle, provider="cpu", threads=1, graphs="cuda", static_step=True)
    assert lean.static_lean_path is not None and full.static_lean_path is None  # on the CPU: off by default
    options = DecodeOptions(beam_size=3, n_best=2)
    got = lean.translate(TEXTS, options)
    assert {step for _, step, _ in lean.static_pool._sessions} == {True}
    for a, b in zip(got, full.translate(TEXTS, options), strict=True):
        assert [(h.token_ids, h.score) for h in a.hypotheses] == [(h.token_ids, h.score) for h in b.hypotheses]
    rows = DecodeOptions(beam_size=3, return_attention=True)
    with_rows = lean.translate(TEXTS, rows)
    assert {step for _, step, _ in lean.static_pool._sessions} == {True, False}
    for a, b in zip(with_rows, full.translate(TEXTS, rows), strict=True):
        assert a.best.token_ids == b.best.token_ids
        np.testing.assert_array_equal(np.array(a.best.attention), np.array(b.best.attention))
