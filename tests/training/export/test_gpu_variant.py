"""A bundle with a second graph set for the GPU (``--gpu-dtype``): written, verified, and chosen by provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.bundle import BundleError, graph_files, read_manifest, sha256_file
from core.graphs import GRAPHS, LEAN_STEP
from core.translation import DecodeOptions
from inference.engine import Engine, EngineError, choose_graphs
from testkit.synthetic import make_pairs


@pytest.fixture(scope="module")
def dual_bundle(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.export import export_bundle

    out = tmp_path_factory.mktemp("dual") / "bundle"
    export_bundle(tiny_checkpoint, out, name="tiny-dual", quantize="int8-channel", tolerance=3.0, gpu_dtype="fp16")
    return out


def test_variant_graphs_are_listed_checked_and_typed(dual_bundle: Path) -> None:
    manifest = read_manifest(dual_bundle)
    variant = manifest["variants"]["cuda"]
    assert variant["dtype"] == "fp16" and variant["provider"] == "CUDAExecutionProvider"
    # fused attention (the GPU set's default): with the lean step (core/graphs.py LEAN_STEP)
    assert graph_files(manifest, "cuda") == {role: f"cuda/{role}.onnx" for role in (*GRAPHS, LEAN_STEP)}
    assert graph_files(manifest) == {role: f"{role}.onnx" for role in GRAPHS}
    assert variant["graphs"]["decoder"]["inputs"]["past_k_0"]["dtype"] == "float16"
    assert manifest["graphs"]["decoder"]["inputs"]["past_k_0"]["dtype"] == "float32"
    assert variant["parity"].get("skipped") or variant["parity"]["random"]["max_abs_diff"] < 0.1
    for role in GRAPHS:
        assert manifest["files"][f"cuda/{role}.onnx"]["sha256"]


def test_auto_takes_the_variant_of_the_provider(dual_bundle: Path) -> None:
    manifest = read_manifest(dual_bundle)
    assert choose_graphs(manifest, "auto", "CUDAExecutionProvider") == "cuda"
    assert choose_graphs(manifest, "auto", "CPUExecutionProvider") is None
    assert choose_graphs(manifest, "main", "CUDAExecutionProvider") is None
    with pytest.raises(EngineError, match="variants"):
        choose_graphs(manifest, "tpu", "CPUExecutionProvider")
    # float: the first set that is not int8 (main is int8-channel here), and the main graphs of a float export
    assert choose_graphs(manifest, "float", "CPUExecutionProvider") == "cuda"
    assert choose_graphs({**manifest, "export": {"quantize": "none"}}, "float", "CPUExecutionProvider") is None
    with pytest.raises(EngineError, match="every graph set of the bundle is int8"):
        choose_graphs({**manifest, "variants": {}}, "float", "CPUExecutionProvider")
    assert Engine.load(dual_bundle, provider="cpu", threads=1).graphs_dtype == "int8-channel"


def test_the_fp16_graphs_translate_like_the_main_ones(dual_bundle: Path, tiny_bundle: Path) -> None:
    """The variant's graphs run on the CPU provider too (slowly): greedy outputs agree with fp32."""
    fp16 = Engine.load(dual_bundle, provider="cpu", threads=1, graphs="cuda")
    fp32 = Engine.load(tiny_bundle, provider="cpu", threads=1)
    assert (fp16.graphs, fp16.graphs_dtype) == ("cuda", "fp16")
    texts = [source for source, _ in make_pairs(24, seed=5, min_len=2, max_len=6)]
    options = DecodeOptions(beam_size=1)
    same = sum(
        a.best.token_ids == b.best.token_ids
        for a, b in zip(fp16.translate(texts, options), fp32.translate(texts, options), strict=True)
    )
    assert same >= 0.9 * len(texts)


def test_a_variant_file_missing_from_the_manifest_is_refused(dual_bundle: Path, tmp_path: Path) -> None:
    manifest = json.loads((dual_bundle / "manifest.json").read_text(encoding="utf-8"))
    del manifest["files"]["cuda/decoder.onnx"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(BundleError, match=r"variants\.cuda\.graphs\.decoder\.file"):
        read_manifest(broken, verify=False)


def test_fp16w_graphs_hold_half_weights_and_compute_like_fp32_on_rounded_weights(
    tiny_checkpoint: Path, tmp_path: Path
) -> None:
    """--gpu-dtype fp16w: the weights are stored as fp16 (the file shrinks), onnxruntime widens them once at
    load (no Cast of a weight is left in the optimized graph), and the beams are those of plain fp32 graphs
    exported from the same checkpoint with its weights rounded to fp16 (an independent export)."""
    import onnx
    import onnxruntime as ort
    import torch

    from training.export import export_bundle

    export_bundle(tiny_checkpoint, tmp_path / "w16", gpu_dtype="fp16w")
    manifest = read_manifest(tmp_path / "w16")
    assert manifest["variants"]["cuda"]["dtype"] == "fp16w"
    assert manifest["variants"]["cuda"]["graphs"]["decoder"]["inputs"]["past_k_0"]["dtype"] == "float32"
    widened = tmp_path / "w16" / "cuda" / "decoder.onnx"
    weights, halves = tmp_path / "w16" / "weights.bin", tmp_path / "w16" / "cuda" / "weights.bin"
    assert halves.stat().st_size < 0.6 * weights.stat().st_size

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(widened), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"), load_external_data=False)
    weights = {t.name for t in optimized.graph.initializer}
    assert not [n.name for n in optimized.graph.node if n.op_type == "Cast" and n.input[0] in weights]

    payload = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)
    payload["model"] = {  # rounded as the export rounds: the tensors of 1,024 values or more
        k: v.half().float() if v.is_floating_point() and v.numel() >= 1024 else v for k, v in payload["model"].items()
    }
    torch.save(payload, tmp_path / "rounded.pt")
    export_bundle(tmp_path / "rounded.pt", tmp_path / "rounded")
    w16 = Engine.load(tmp_path / "w16", provider="cpu", threads=1, graphs="cuda")
    reference = Engine.load(tmp_path / "rounded", provider="cpu", threads=1)
    texts = [source for source, _ in make_pairs(24, seed=7, min_len=1, max_len=7)]
    options_4 = DecodeOptions(beam_size=4, n_best=2)
    for a, b in zip(w16.translate(texts, options_4), reference.translate(texts, options_4), strict=True):
        assert [h.token_ids for h in a.hypotheses] == [h.token_ids for h in b.hypotheses]
        assert [h.score for h in a.hypotheses] == pytest.approx([h.score for h in b.hypotheses], abs=1e-4)


def test_static_step_graphs_are_listed_and_fold_to_fixed_shapes(tiny_static_bundle: Path, tiny_bundle: Path) -> None:
    """``--static-step`` adds static_decoder and place to the GPU set. With its free dimensions fixed, onnxruntime
    folds every shape computation of the static decoder away: what CUDA graph capture needs (no Shape node, whose
    output the CUDA provider keeps on the host)."""
    import collections

    import onnx
    import onnxruntime as ort

    from core.graphs import STATIC_GRAPHS

    manifest = read_manifest(tiny_static_bundle)
    files = graph_files(manifest, "cuda")
    assert {role: files[role] for role in STATIC_GRAPHS} == {role: f"cuda/{role}.onnx" for role in STATIC_GRAPHS}
    assert set(graph_files(manifest)) == set(GRAPHS)
    assert set(graph_files(read_manifest(tiny_bundle))) == set(GRAPHS)
    with pytest.raises(EngineError, match="static-step"):
        Engine.load(tiny_bundle, provider="cpu", threads=1, static_step=True)

    def op_counts(fixed: bool) -> collections.Counter[str]:
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(tiny_static_bundle.parent / f"optimized-{fixed}.onnx")
        if fixed:
            for name, size in {"batch": 2, "hyps": 4, "rows": 8, "src_len": 16, "steps": 32, "packed": 18}.items():
                options.add_free_dimension_override_by_name(name, size)
        static_decoder = str(tiny_static_bundle / files["static_decoder"])
        ort.InferenceSession(static_decoder, options, providers=["CPUExecutionProvider"])
        return collections.Counter(
            n.op_type for n in onnx.load(options.optimized_model_filepath, load_external_data=False).graph.node
        )

    assert op_counts(False)["Shape"] > 0  # the check can fail: the dynamic graph computes shapes
    fixed = op_counts(True)
    assert fixed["Shape"] == fixed["Range"] == 0 and fixed["TopK"] == 1


def test_static_step_needs_a_gpu_set(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from training.export import export_bundle
    from training.export.common import ExportError

    with pytest.raises(ExportError, match="--gpu-dtype"):
        export_bundle(tiny_checkpoint, tmp_path / "b", static_step=True)


def test_each_set_stores_a_weight_once(tiny_static_bundle: Path) -> None:
    """The static decoder step holds the dynamic one's weights and the decoder the encoder's embedding: each set
    keeps them in its own weights.bin (training/export/weights.py), one copy each, and the graphs refer to it."""
    import onnx

    manifest = read_manifest(tiny_static_bundle)
    for prefix, roles in (("", ("encoder", "decoder")), ("cuda/", ("encoder", "decoder", "static_decoder"))):
        assert f"{prefix}weights.bin" in manifest["files"]
        places: dict[str, set[tuple[str, str]]] = {}
        for role in roles:
            graph = onnx.load(str(tiny_static_bundle / f"{prefix}{role}.onnx"), load_external_data=False).graph
            for tensor in graph.initializer:
                if tensor.data_location == onnx.TensorProto.EXTERNAL:
                    entry = {e.key: e.value for e in tensor.external_data}
                    assert entry["location"] == "weights.bin"
                    places.setdefault(role, set()).add((entry["offset"], entry["length"]))
        assert places["encoder"] & places["decoder"], f"{prefix}: the tied embedding should be stored once"
        if prefix:
            assert places["static_decoder"] <= places["decoder"] | places["encoder"]
        stored = sum(int(length) for _, length in set().union(*places.values()))
        assert stored <= manifest["files"][f"{prefix}weights.bin"]["bytes"]


@pytest.mark.parametrize("fixture", ["tiny_static_bundle", "tiny_fused_bundle"])
def test_top_k_reads_k_as_fed_so_no_step_copies_it_back_to_the_host(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """onnxruntime's CUDA TopK reads k on the host: any node between the input and TopK runs on the GPU and adds a
    MemcpyToHost (and a stream sync) to every step, which also makes the step impossible to capture as a CUDA
    graph. So every decoder's TopK must read the graph input itself, a 1-element vector."""
    import onnx

    bundle: Path = request.getfixturevalue(fixture)
    for name in ("decoder.onnx", "cuda/decoder.onnx", "cuda/static_decoder.onnx"):
        graph = onnx.load(str(bundle / name), load_external_data=False).graph
        (k,) = [i for i in graph.input if i.name == "k"]
        assert [d.dim_value for d in k.type.tensor_type.shape.dim] == [1], name
        (top_k,) = [n for n in graph.node if n.op_type == "TopK"]
        assert top_k.input[1] == "k", name
        assert [n.op_type for n in graph.node if "k" in n.input] == ["TopK"], name


def test_bundles_whose_decoder_takes_a_scalar_k_still_translate(tiny_bundle: Path, tmp_path: Path) -> None:
    """Bundles exported before k became a vector (the shipped ones among them) feed TopK through a Reshape: the
    engine feeds k in the shape each graph declares, and translates them as before."""
    import shutil

    import onnx
    from onnx import helper

    old = tmp_path / "old"
    shutil.copytree(tiny_bundle, old)
    model = onnx.load(str(old / "decoder.onnx"), load_external_data=False)
    graph = model.graph
    (k,) = [i for i in graph.input if i.name == "k"]
    del k.type.tensor_type.shape.dim[:]  # the scalar of the earlier exports
    graph.initializer.append(helper.make_tensor("k_shape", onnx.TensorProto.INT64, [1], [1]))
    (top_k,) = [n for n in graph.node if n.op_type == "TopK"]
    top_k.input[1] = "k_vector"
    graph.node.insert(0, helper.make_node("Reshape", ["k", "k_shape"], ["k_vector"]))
    onnx.save(model, str(old / "decoder.onnx"))
    manifest = read_manifest(old, verify=False)
    entry = manifest["files"]["decoder.onnx"]
    entry["bytes"], entry["sha256"] = (old / "decoder.onnx").stat().st_size, sha256_file(old / "decoder.onnx")
    (old / "manifest.json").write_text(json.dumps(manifest))
    texts = [source for source, _ in make_pairs(6, seed=5)]
    options = DecodeOptions(beam_size=3, max_length=24)
    engine = Engine.load(old, provider="cpu")
    assert engine.k_shape == ()
    expected = Engine.load(tiny_bundle, provider="cpu")
    assert expected.k_shape == (1,)
    assert [t.best.text for t in engine.translate(texts, options)] == [
        t.best.text for t in expected.translate(texts, options)
    ]


def test_packed_and_unpacked_static_steps_translate_alike(
    tiny_checkpoint: Path, tiny_static_bundle: Path, tmp_path: Path
) -> None:
    """Exports since session 25 pack the static step's three host inputs into one vector and its top-k into one
    tensor (one copy each way a step); a bundle with the earlier layout still decodes, the same tokens."""
    from training.export import export_bundle

    unpacked = tmp_path / "unpacked"
    meta = {"name": "tiny-reverse", "version": "1", "source_language": "en", "target_language": "de"}
    export_bundle(tiny_checkpoint, unpacked, **meta, gpu_dtype="fp32", static_step=True, pack_static_step=False)  # type: ignore[arg-type]
    listed = {
        b: read_manifest(b)["variants"]["cuda"]["graphs"]["static_decoder"] for b in (tiny_static_bundle, unpacked)
    }
    assert "step_ids" in listed[tiny_static_bundle]["inputs"] and "topk" in listed[tiny_static_bundle]["outputs"]
    assert {"tokens", "positions", "reorder"} <= set(listed[unpacked]["inputs"])
    texts = ["a b c d", "c c a", "b a", "d d d c b a"]
    options = DecodeOptions(beam_size=3, max_length=12)
    got = {}
    for bundle in (tiny_static_bundle, unpacked):
        engine = Engine.load(bundle, provider="cpu", threads=1, static_step=True)
        assert engine.static_packed == (bundle == tiny_static_bundle)
        got[bundle] = [t.best.token_ids for t in engine.translate(texts, options)]
    assert got[tiny_static_bundle] == got[unpacked]
