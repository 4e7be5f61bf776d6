"""A vocabulary shortlist for the CPU: each sentence's decoder steps score only the target pieces it can plausibly use.

On the CPU a batch-1 decoder step of the default model spends much of its time in the output projection: an 8 MB
fp32 matrix read for 4 rows, then a log-softmax and a top-k over 8,000 pieces (`python -m bench profile-decode
--batch 1` puts its Gemm at a quarter of the step's kernel time). A shortlist keeps, for one sentence,

* the ``frequent`` most frequent target pieces of the training data (function words, punctuation),
* the source's own pieces (names, numbers and placeholders pass through; the vocabulary is joint), unless
  ``--no-copy-source``,
* for each source piece its ``per_piece`` likeliest translations among the other pieces, by IBM Model 1 on the
  training pairs (:func:`build_table`),
* EOS and UNK,

and the decoder step computes logits for those pieces only. It is an approximation (a piece outside the list cannot
be produced), so the engine uses it only when asked (``Engine.load(shortlist=True)``) and ``python -m bench
shortlist`` measures what it costs in BLEU and gains in speed.

``python -m training shortlist BUNDLE --data TRAIN.tsv`` writes into a bundle

* ``shortlist.npz``: ``frequent`` (F,) and ``candidates`` (vocab, per_piece) int32, -1 padding, and the output
  projection's ``bias`` (vocab,) float32; its weight is read from the bundle's weights file where the decoder keeps
  it (the manifest's ``shortlist.weight``: file, offset, shape), or stored here as ``weight`` (vocab, d_model);
* ``decoder_shortlist.onnx``: the bundle's main decoder, its output projection taken as inputs: ``vocab`` (N,)
  int64, the pieces the running set's sentences may use, ``weight`` (N, d_model) and ``bias`` (N,), their rows of
  the projection (gathered by the engine once per change of the set, not each step), and ``mask`` (rows, N)
  float32, 0 where a hypothesis' sentence may use the piece and -inf where not, added to the logits before the
  log-softmax (so a sentence's scores do not depend on its batch mates' lists); ``topk_ids`` are mapped back to
  vocabulary ids. Its other weights are the bundle's weights file's: the bundle grows by the table and a graph
  (~1 MB for the default model).

and records both under the manifest's ``shortlist`` key.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from core.bundle import read_manifest, write_manifest
from core.graphs import SHORTLIST_INPUTS
from core.tokenizer import Tokenizer
from inference.shortlist import GRAPH_FILE, TABLE_FILE
from training.data import read_tsv

log = logging.getLogger(__name__)

FLOOR = 80.0
"""How far below a row's best listed logit the step raises the lower ones before its log-softmax (see
:func:`shortlist_graph`): a listed piece more than this many nats below the best gets the floor's log-probability
(a label-smoothed model's rows span ~10-30 nats), one outside the list -inf."""

MIN_FREQUENT = 16
"""A sentence's list always holds at least this many pieces (the search asks each step for 2 x beam of them, more
with the n-gram guard; a sentence with fewer gets -inf proposals past its list)."""


def build_table(
    tokenizer: Tokenizer, pairs: list[tuple[str, str]], per_piece: int, frequent: int, iterations: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """(frequent ids (F,), candidates (vocab, per_piece) int32 with -1 padding) from parallel text: the ``frequent``
    most frequent target pieces, and for each source piece the ``per_piece`` others it likeliest translates into
    (:func:`translation_table`)."""
    if frequent < MIN_FREQUENT:
        raise ValueError(f"frequent={frequent}: at least {MIN_FREQUENT}")
    vocab = len(tokenizer)
    sources = [np.array(tokenizer.encode_source(source), np.int64) for source, _ in pairs]
    targets = [np.array(tokenizer.encode_target(target), np.int64) for _, target in pairs]
    frequency = np.bincount(np.concatenate(targets), minlength=vocab)
    table = translation_table(sources, targets, vocab, iterations)
    top = np.argsort(-frequency, kind="stable")[:frequent]
    top = top[frequency[top] > 0]
    table[:, top] = -1.0  # every sentence has those: each source piece's own slots go to others
    order = np.argsort(-table, axis=1, kind="stable")[:, :per_piece]
    found = np.take_along_axis(table, order, axis=1) > 0
    return np.sort(top).astype(np.int32), np.where(found, order, -1).astype(np.int32)


def translation_table(sources: list[np.ndarray], targets: list[np.ndarray], vocab: int, iterations: int) -> np.ndarray:
    """IBM Model 1's t(target piece | source piece) (Brown et al. 1993), (vocab, vocab) float32: each target piece
    of a pair is drawn from one of its source pieces or from NULL, ``iterations`` rounds of EM from uniform."""
    null = vocab  # the source side's extra row: target pieces no source piece accounts for (articles, endings)
    table = np.full((vocab + 1, vocab), 1.0 / vocab, np.float32)
    for round_ in range(iterations):
        counts = np.zeros((vocab + 1) * vocab)
        keys: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for source, t in zip(sources, targets, strict=True):
            s = np.append(source, null)
            p = table[s[:, None], t[None, :]]
            keys.append((s[:, None] * vocab + t[None, :]).reshape(-1))
            weights.append((p / p.sum(axis=0, keepdims=True)).reshape(-1))  # which source piece made each target one
            if len(keys) == 5000:
                counts += np.bincount(np.concatenate(keys), np.concatenate(weights), minlength=len(counts))
                keys, weights = [], []
        if keys:
            counts += np.bincount(np.concatenate(keys), np.concatenate(weights), minlength=len(counts))
        by_source = counts.reshape(vocab + 1, vocab)
        table = (by_source / np.maximum(by_source.sum(axis=1, keepdims=True), 1e-12)).astype(np.float32)
        log.info("shortlist: IBM model 1, round %d of %d", round_ + 1, iterations)
    return table[:vocab]


def floored(logits: str, mask: str, out: str, opset: int) -> list[Any]:
    """The nodes that mask ``logits`` for the log-softmax after them: ``mask`` (0 / -inf) added, then every value
    raised to ``FLOOR`` below the row's maximum into ``out`` (the last axis), so that no row holds -inf or anything
    ~88 below its maximum, where onnxruntime's CPU LogSoftmax turns several times slower (``python -m bench
    masked-softmax`` times this chain against the alternatives)."""
    from onnx import TensorProto, helper

    def constant(name: str, dtype: int, value: float | int) -> Any:
        return helper.make_node("Constant", [], [name], name=name, value=helper.make_tensor(name, dtype, [1], [value]))

    if opset < 18:  # ReduceMax's axes: an attribute before opset 18, an input since
        best = [helper.make_node("ReduceMax", [out + "/masked"], [out + "/best"], axes=[-1], keepdims=1)]
    else:
        best = [
            constant(out + "/last_axis", TensorProto.INT64, -1),
            helper.make_node("ReduceMax", [out + "/masked", out + "/last_axis"], [out + "/best"], keepdims=1),
        ]
    return [
        helper.make_node("Add", [logits, mask], [out + "/masked"], name=out + "/Mask"),
        *best,
        constant(out + "/floor_gap", TensorProto.FLOAT, FLOOR),
        helper.make_node("Sub", [out + "/best", out + "/floor_gap"], [out + "/floor"], name=out + "/Floor"),
        helper.make_node("Max", [out + "/masked", out + "/floor"], [out], name=out + "/Raise"),
    ]


def shortlist_graph(decoder: Path, out: Path) -> tuple[dict[str, Any] | np.ndarray, np.ndarray]:
    """Write the shortlisted decoder step (module docstring) and return the output projection it replaced, which the
    engine gathers from: where the weight lies in the bundle's weights file (``file``, ``offset``, ``shape`` (d_model,
    vocab) float32), or the (vocab, d_model) weight itself when the graph holds it inline; and the (vocab,) bias.
    Refuses a decoder whose output projection is not a float MatMul of a constant (d_model, vocab) weight plus a
    constant bias (an int8 output projection)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from training.export.optimize import sort_nodes

    model = onnx.load(str(decoder), load_external_data=False)
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    topk = [n for n in graph.node if n.op_type == "TopK"]
    if len(topk) != 1:
        raise ValueError(f"{decoder}: expected one TopK, found {len(topk)}")
    (top,) = topk
    chain = []  # TopK <- LogSoftmax <- [Cast] <- Add(bias) <- MatMul(weight)
    node = producer[top.input[0]]
    while node.op_type in ("LogSoftmax", "Cast"):
        chain.append(node)
        node = producer[node.input[0]]
    add = node
    matmul = producer.get(add.input[0])
    softmax = next((n for n in chain if n.op_type == "LogSoftmax"), None)
    if add.op_type != "Add" or matmul is None or matmul.op_type != "MatMul" or softmax is None:
        raise ValueError(
            f"{decoder}: the output projection is not MatMul + Add before the log-softmax (int8 logits?); export "
            "with --quantize int8-channel-fp32-logits or fp32"
        )
    initializers = {i.name: i for i in graph.initializer}
    constants = {n.output[0]: n for n in graph.node if n.op_type == "Constant"}
    weight_name, bias_name = matmul.input[1], add.input[1]
    if weight_name not in initializers or (bias_name not in initializers and bias_name not in constants):
        raise ValueError(f"{decoder}: the output projection's weight or bias is not a constant")
    stored = initializers[weight_name]
    if stored.data_type != TensorProto.FLOAT:
        raise ValueError(f"{decoder}: the output projection's weight is not float32")
    external = {e.key: e.value for e in stored.external_data}
    weight: dict[str, Any] | np.ndarray
    if stored.data_location == TensorProto.EXTERNAL and "offset" in external:
        weight = {"file": external["location"], "offset": int(external["offset"]), "shape": list(stored.dims)}
    else:
        weight = np.ascontiguousarray(numpy_helper.to_array(stored).T)
    bias_tensor = initializers[bias_name] if bias_name in initializers else constants[bias_name].attribute[0].t
    if bias_tensor.data_location == TensorProto.EXTERNAL:
        from onnx.external_data_helper import load_external_data_for_tensor

        load_external_data_for_tensor(bias_tensor, str(decoder.parent))
    bias = numpy_helper.to_array(bias_tensor).astype(np.float32).reshape(-1)
    # The host gathers the listed pieces' rows of the (vocab, d_model) weight once per change of the running set
    # (gathering them in the graph each step cost as much as it saved), and Gemm takes them transposed.
    logits = add.output[0]
    vocab, weight_input, bias_input, mask = SHORTLIST_INPUTS

    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))

    # The mask is added, not selected with Where (3x faster on onnxruntime's CPU), and the masked logits are raised
    # to FLOOR below the row's best listed one before the log-softmax: onnxruntime's CPU LogSoftmax takes ~9x as long
    # over a row holding -inf or anything ~88 below its maximum (its exp's slow path), which made the shortlist lose
    # at batch 8 and more. A piece at the floor adds exp(-FLOOR) to the sum (invisible in float32); what the top-k
    # picks there from outside the list gets -inf back from the mask.
    nodes = [
        helper.make_node(
            "Gemm", [matmul.input[0], weight_input, bias_input], [logits], transB=1, name="shortlist/Logits"
        ),
        *floored(softmax.input[0], mask, "shortlist/raised", opset),
        helper.make_node(
            "GatherElements", [mask, "shortlist/top_index"], ["shortlist/picked"], axis=-1, name="shortlist/Picked"
        ),
        helper.make_node(
            "Add", ["shortlist/top_raised", "shortlist/picked"], [top.output[0]], name="shortlist/Unlisted"
        ),
        helper.make_node("Gather", [vocab, "shortlist/top_index"], [top.output[1]], axis=0, name="shortlist/Ids"),
    ]
    graph.node.remove(matmul)
    graph.node.remove(add)
    if bias_name in constants:
        graph.node.remove(constants[bias_name])
    softmax.input[0] = "shortlist/raised"
    top.output[0], top.output[1] = "shortlist/top_raised", "shortlist/top_index"
    graph.node.extend(nodes)
    d_model = int(stored.dims[0])
    graph.input.extend(
        [
            helper.make_tensor_value_info(vocab, TensorProto.INT64, ["shortlist"]),
            helper.make_tensor_value_info(weight_input, TensorProto.FLOAT, ["shortlist", d_model]),
            helper.make_tensor_value_info(bias_input, TensorProto.FLOAT, ["shortlist"]),
            helper.make_tensor_value_info(mask, TensorProto.FLOAT, ["mask_rows", "shortlist"]),
        ]
    )
    sort_nodes(graph)
    used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]  # the full projection's weight is no longer read
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.value_info[:]  # shapes along the projection changed: onnxruntime infers them again
    onnx.save(model, str(out))
    return weight, bias


def add_to_bundle(
    bundle: Path,
    data: list[Path],
    per_piece: int,
    frequent: int,
    *,
    limit: int = 0,
    copy_source: bool = True,
    reverse: bool = False,
) -> dict[str, Any]:
    """Build the table from the TSVs, write it and the shortlisted decoder into the bundle, update its manifest."""
    manifest = read_manifest(bundle)
    tokenizer = Tokenizer(bundle)
    pairs = [
        (target, source) if reverse else (source, target)
        for path in data
        for source, target in read_tsv(path)
        if source.strip() and target.strip()
    ]
    if limit:
        pairs = pairs[:limit]
    if not pairs:
        raise ValueError(f"no source<TAB>target pairs in {', '.join(map(str, data))}")
    top, candidates = build_table(tokenizer, pairs, per_piece, frequent)
    weight, bias = shortlist_graph(bundle / manifest["graphs"]["decoder"]["file"], bundle / GRAPH_FILE)
    if isinstance(weight, np.ndarray):  # the decoder held it inline: the table carries it
        np.savez_compressed(bundle / TABLE_FILE, frequent=top, candidates=candidates, bias=bias, weight=weight)
    else:
        np.savez_compressed(bundle / TABLE_FILE, frequent=top, candidates=candidates, bias=bias)
    manifest["shortlist"] = {
        "table": TABLE_FILE,
        "graph": GRAPH_FILE,
        "per_piece": per_piece,
        "frequent": int(len(top)),
        "copy_source": copy_source,
        **({"weight": weight} if isinstance(weight, dict) else {}),
        "pairs": len(pairs),
        "data": [Path(p).name for p in data],
        **({"reversed": True} if reverse else {}),
    }
    write_manifest(bundle, manifest)
    return dict(manifest["shortlist"])
