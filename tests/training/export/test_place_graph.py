"""The static bundle's ``place`` graph (training/export/trace.py, training/export/place.py): it writes new sentences'
memory into free slots of a running set's buffers with ScatterNDs whose every index copies at most d_head values
(onnxruntime's CUDA kernel copies each index's slice in one thread), exactly as a slot-indexed scatter would; and
``python -m training place-graph`` brings an older bundle's graph to today's."""

from __future__ import annotations

import hashlib
import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from core.bundle import BundleError, read_manifest, write_manifest
from core.translation import DecodeOptions
from inference.engine import Engine
from testkit.running import graph_runs
from testkit.synthetic import make_pairs
from training.export.place import check_place, place_inputs, rewrite_place

CPU = ["CPUExecutionProvider"]


def _place(bundle: Path) -> Path:
    return bundle / read_manifest(bundle)["variants"]["cuda"]["graphs"]["place"]["file"]


def _hashes(bundle: Path) -> dict[str, str]:
    return {
        p.relative_to(bundle).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in bundle.rglob("*")
        if p.is_file()
    }


def slot_indexed(graph: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph as bundles before session 42 had it: every ScatterND indexed by slot only (``slot_rows``, the
    slots as a column), the nodes that built the finer indices gone."""
    old = onnx.ModelProto()
    old.CopyFrom(graph)
    for node in old.graph.node:
        if node.op_type == "ScatterND":
            node.input[1] = "slot_rows"
    needed = {o.name for o in old.graph.output}
    kept: list[onnx.NodeProto] = []
    for node in reversed(old.graph.node):
        if any(name in needed for name in node.output):
            kept.append(node)
            needed |= set(node.input)
    del old.graph.node[:]
    old.graph.node.extend(reversed(kept))
    used = {name for node in old.graph.node for name in node.input}
    initializers = [t for t in old.graph.initializer if t.name in used]
    del old.graph.initializer[:]
    old.graph.initializer.extend(initializers)
    onnx.checker.check_model(old, full_check=True)
    return old


def slices(graph: onnx.ModelProto, shape: tuple[int, int, int, int]) -> dict[str, int]:
    """Per output, the values one index of its ScatterND copies (one CUDA thread's work), run on the CPU."""
    probe = onnx.ModelProto()
    probe.CopyFrom(graph)
    scatters = [n for n in probe.graph.node if n.op_type == "ScatterND"]
    for node in scatters:
        probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(node.input[1]))
    session = ort.InferenceSession(probe.SerializeToString(), providers=CPU)
    feeds = place_inputs(session, shape)
    values = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))
    out = {}
    for node in scatters:
        data, indices = feeds[node.input[0]], values[node.input[1]]
        out[node.output[0]] = math.prod(data.shape[indices.shape[-1] :])
    return out


def test_each_index_of_place_copies_at_most_d_head_values(tiny_static_bundle: Path) -> None:
    """A CUDA thread copies one index's slice: at most d_head values (the mask: one), whatever the width."""
    d_head = int(read_manifest(tiny_static_bundle)["architecture"]["d_head"])
    graph = onnx.load(str(_place(tiny_static_bundle)))
    for shape in ((1, 1, 16, 16), (16, 4, 64, 17)):
        copied = slices(graph, shape)
        assert copied.pop("placed_src_mask") == 1
        assert copied and set(copied.values()) == {d_head}, copied
    # the test can tell: the slot-indexed graph copies a slot's heads x width x d_head values an index
    copied = slices(slot_indexed(graph), (16, 4, 64, 17))
    assert copied["placed_src_mask"] == 64 and copied["placed_cross_k_0"] > 64 * d_head


def test_place_writes_new_sentences_into_their_slots_where_the_buffers_lie(tiny_static_bundle: Path) -> None:
    """Bound as the engine binds it (outputs into the inputs' own buffers), place writes each new sentence into its
    slot, padded to the set's width (mask padding masked, keys and values 0), and leaves every other slot as it was."""
    session = ort.InferenceSession(str(_place(tiny_static_bundle)), providers=CPU)
    for seed, shape in enumerate(((1, 1, 16, 16), (8, 3, 32, 17), (16, 4, 64, 64))):
        feeds = place_inputs(session, shape, seed)
        expected = {}
        for name in (i.name for i in session.get_inputs() if not i.name.startswith("new_") and i.name != "slots"):
            want, new = feeds[name].copy(), feeds["new_" + name]
            axis = 1 if want.ndim == 2 else 2
            fill = True if want.dtype == bool else 0
            padded = np.full(new.shape[:axis] + (want.shape[axis],) + new.shape[axis + 1 :], fill, dtype=want.dtype)
            padded[(slice(None),) * axis + (slice(0, new.shape[axis]),)] = new
            want[feeds["slots"]] = padded
            expected[name] = want
        values = {name: ort.OrtValue.ortvalue_from_numpy(value) for name, value in feeds.items()}
        binding = session.io_binding()
        for name, value in values.items():
            binding.bind_ortvalue_input(name, value)
        for name in expected:
            binding.bind_ortvalue_output("placed_" + name, values[name])
        session.run_with_iobinding(binding)
        for name, want in expected.items():
            assert np.array_equal(values[name].numpy(), want), (shape, name)


def test_the_command_rebuilds_an_older_place_and_changes_nothing_else(tiny_static_bundle: Path, tmp_path: Path) -> None:
    """``place-graph`` on a bundle with the slot-indexed place: the file and its manifest entry change, every other
    file stays byte for byte, the static engine translates as before (admissions beside running sentences included),
    and a second run changes nothing."""
    bundle = tmp_path / "older"
    shutil.copytree(tiny_static_bundle, bundle)
    place = _place(bundle)
    today = place.read_bytes()
    manifest = read_manifest(bundle)
    onnx.save(slot_indexed(onnx.load(str(place))), str(place))
    write_manifest(bundle, {k: v for k, v in manifest.items() if k != "files"})
    before = _hashes(bundle)

    texts = [source for source, _ in make_pairs(6, seed=3)]
    options = DecodeOptions(beam_size=3, max_length=16)

    def translations() -> list[list[int]]:
        engine = Engine.load(bundle, provider="cpu", graphs="cuda", static_step=True)
        roles = graph_runs(engine)
        whole = [t.best.token_ids for t in engine.translate(texts, options)]
        running, finished, pending, step = engine.running_set(), {}, list(enumerate(texts)), 0
        while pending or running:
            if pending and step % 2 == 0:  # one sentence every other step, beside the running ones: place runs
                running.admit([(*pending.pop(0), options)])
            finished.update(running.step())
            step += 1
        assert "place" in roles
        return whole + [finished[i].best.token_ids for i in range(len(texts))]

    old = translations()
    assert rewrite_place(bundle) == {"file": "cuda/place.onnx", "set": "cuda", "replaced": True}
    assert place.read_bytes() == today
    after = _hashes(bundle)
    assert {name for name in after if after[name] != before.get(name)} == {"cuda/place.onnx", "manifest.json"}
    assert read_manifest(bundle)["files"]["cuda/place.onnx"]["sha256"] == hashlib.sha256(today).hexdigest()
    assert translations() == old
    assert rewrite_place(bundle)["replaced"] is False


def test_a_place_graph_that_writes_otherwise_is_refused(tiny_static_bundle: Path, tmp_path: Path) -> None:
    """The check compares the outputs bit for bit: a graph that pads keys with another value is refused."""
    graph = onnx.load(str(_place(tiny_static_bundle)))
    for tensor in graph.graph.initializer:
        if tensor.name == "fill_cross_k_0":
            tensor.CopyFrom(onnx.numpy_helper.from_array(np.array(1, dtype=np.float32), tensor.name))
    with pytest.raises(BundleError, match="writes another placed_cross_k_0"):
        check_place(_place(tiny_static_bundle), graph.SerializeToString())
    with pytest.raises(BundleError, match="no graph set 'nope'"):
        rewrite_place(tiny_static_bundle, "nope")
