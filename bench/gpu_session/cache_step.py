"""What one self-attention layer's cache costs a decoder step, the way the steps keep it and ways that move less:
one-layer graphs of the same attention, timed side by side.

    PYTHONPATH=TREE python bench/gpu_session/cache_step.py [--provider cpu|cuda] [--rows 4,512] [--columns 32,64,128]
                                                          [--dtype fp32|fp16] [--repeats 200] [--no-capture]
                                                          [--out FILE.json]

Rows are hypotheses, ``BEAM`` to a sentence; each continues a row of its own sentence (the beam's reorder). Kinds:

- ``shift``: the static step's layer (training/incremental.py ``DecoderStep``, ``static``, fused attention): keys
  and values right-aligned in ``T`` columns; a step gathers the rows by the reorder, drops the oldest column
  (``Slice``) and onnxruntime's ``MultiHeadAttention`` copies past and new into its ``present``. The cache is read
  and written three times before the attention reads it.
- ``plain``: the dynamic step's layer as the CPU runs it (the main graphs): gather, a ``Concat`` that grows the
  cache by the new column, the attention in plain operators.
- ``clock``: the columns stay where they were written: step ``t`` writes column ``t mod T`` of every row (a
  ``ScatterND`` into the gathered rows), a row's mask says which columns are its own, and ``MultiHeadAttention``
  takes the cache as keys already split into heads: one gather, a small scatter, the attention's read.
- ``dmmha``: onnxruntime's ``DecoderMaskedMultiHeadAttention`` after the gather: the attention in one kernel that
  also writes the new column (at ``past_sequence_length``, a host input, fixed at ``T - 1`` as a replayed graph
  would fix it; the column drop a real step would need is not in it).
- ``indirect``: the same kernel with a beam index (``cache_indirection``: for each row and column, which row of
  its sentence holds the key): no gather at all, the new column written in place into the bound buffer.

Every kind's attention output is checked against ``shift``'s on the same history before its time counts (a softmax
does not care in which column a key lies; positions are in the embeddings); CUDA's kernel reads keys in its own
layout, ``(rows, heads, d_head / x, T, x)`` with ``x`` values in 16 bytes, which the feeds follow. Prints a table:
µs a run, the median of ``--repeats`` after 20 warm-up runs; on CUDA each graph captured and replayed as the static
step is, unless ``--no-capture``. Exit status 1 when a kind's output differs. Figures in docs/inference-core.md,
session 43.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

KINDS = ("shift", "plain", "clock", "dmmha", "indirect")
BEAM = 4
"""Rows come in groups of a sentence's hypotheses; the reorder permutes rows within a group, as a beam's does."""
HEADS, D_HEAD = 4, 64
"""The default model's attention (d_model 256)."""
MASKED = -10000.0


def _graph(kind: str, rows: int, columns: int, dtype: int) -> bytes:
    """One self-attention layer's cache and attention for ``rows`` rows of ``columns`` cache columns."""
    d_model = HEADS * D_HEAD
    v = helper.make_tensor_value_info
    cache = [rows, HEADS, columns, D_HEAD]
    inputs = [
        v("query", dtype, [rows, 1, d_model]),
        v("key", dtype, [rows, 1, d_model]),
        v("value", dtype, [rows, 1, d_model]),
        v("reorder", TensorProto.INT64, [rows]),
        v("own", TensorProto.INT32, [rows, columns]),
        v("past_key", dtype, cache),
        v("past_value", dtype, cache),
    ]
    outputs = [v("out", dtype, [rows, 1, d_model]), v("present_key", dtype, cache), v("present_value", dtype, cache)]
    mha = {"domain": "com.microsoft", "num_heads": HEADS, "mask_filter_value": MASKED}
    nodes = [
        helper.make_node("Gather", ["past_key", "reorder"], ["rows_key"], axis=0),
        helper.make_node("Gather", ["past_value", "reorder"], ["rows_value"], axis=0),
    ]
    initializers = []
    if kind == "indirect":
        # The same kernel reading each row's past through a beam index (batch, beam, T): no gather of the cache at
        # all, the new column written in place into the bound buffer (past and present bound to one buffer).
        inputs[3] = v("indirection", TensorProto.INT32, [rows // BEAM, BEAM, columns])
        initializers = [
            helper.make_tensor("past_length", TensorProto.INT32, [1], [columns - 1]),
            helper.make_tensor("beam_width", TensorProto.INT32, [1], [BEAM]),
        ]
        nodes = [
            helper.make_node(
                "DecoderMaskedMultiHeadAttention",
                ["query", "key", "value", "own", "", "past_key", "past_value", "past_length", "beam_width",
                 "indirection"],
                ["out", "present_key", "present_value"],
                past_present_share_buffer=1,
                **mha,
            )
        ]  # fmt: skip
    elif kind == "plain":
        # The CPU's (main) decoder step: the cache grows by the new column (a past of T - 1 columns and a Concat),
        # the attention in plain operators.
        inputs[5] = v("past_key", dtype, [rows, HEADS, columns - 1, D_HEAD])
        inputs[6] = v("past_value", dtype, [rows, HEADS, columns - 1, D_HEAD])
        initializers = [
            helper.make_tensor("heads", TensorProto.INT64, [4], [rows, 1, HEADS, D_HEAD]),
            helper.make_tensor("merged", TensorProto.INT64, [3], [rows, 1, d_model]),
            helper.make_tensor("scale", dtype, [1], [1 / D_HEAD**0.5]),
            helper.make_tensor("masked", dtype, [1], [float("-inf")]),
            helper.make_tensor("zero", TensorProto.INT32, [1], [0]),
            helper.make_tensor("mask_shape", TensorProto.INT64, [4], [rows, 1, 1, columns]),
        ]
        for t in ("query", "key", "value"):
            nodes += [
                helper.make_node("Reshape", [t, "heads"], [f"{t}_split"]),
                helper.make_node("Transpose", [f"{t}_split"], [f"{t}_heads"], perm=[0, 2, 1, 3]),
            ]
        nodes += [
            helper.make_node("Concat", ["rows_key", "key_heads"], ["present_key"], axis=2),
            helper.make_node("Concat", ["rows_value", "value_heads"], ["present_value"], axis=2),
            helper.make_node("Transpose", ["present_key"], ["keys_t"], perm=[0, 1, 3, 2]),
            helper.make_node("MatMul", ["query_heads", "keys_t"], ["raw"]),
            helper.make_node("Mul", ["raw", "scale"], ["scores"]),
            helper.make_node("Equal", ["own", "zero"], ["hidden"]),
            helper.make_node("Reshape", ["hidden", "mask_shape"], ["hidden_4d"]),
            helper.make_node("Where", ["hidden_4d", "masked", "scores"], ["scores_masked"]),
            helper.make_node("Softmax", ["scores_masked"], ["weights"], axis=-1),
            helper.make_node("MatMul", ["weights", "present_value"], ["context"]),
            helper.make_node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", ["context_t", "merged"], ["out"]),
        ]
    elif kind == "shift":
        initializers = [
            helper.make_tensor(name, TensorProto.INT64, [1], [value])
            for name, value in (("start", 1), ("end", columns), ("axis", 2))
        ]
        nodes += [
            helper.make_node("Slice", [f"rows_{t}", "start", "end", "axis"], [f"kept_{t}"]) for t in ("key", "value")
        ]
        nodes.append(
            helper.make_node(
                "MultiHeadAttention",
                ["query", "key", "value", "", "own", "", "kept_key", "kept_value"],
                ["out", "present_key", "present_value"],
                **mha,
            )
        )
    elif kind == "dmmha":
        # onnxruntime's DecoderMaskedMultiHeadAttention: the attention in one kernel, which writes the new key and
        # value into column past_sequence_length of the buffer it reads (past and present one buffer). Its length
        # is a host input, fixed at T - 1 here as a replayed graph would fix it: the rows gathered by the reorder
        # (a gather into a buffer of onnxruntime's, then copied into the bound present: one pass more than clock's
        # in place), no beam indirection.
        initializers = [helper.make_tensor("past_length", TensorProto.INT32, [1], [columns - 1])]
        nodes.append(
            helper.make_node(
                "DecoderMaskedMultiHeadAttention",
                ["query", "key", "value", "own", "", "rows_key", "rows_value", "past_length"],
                ["out", "present_key", "present_value"],
                past_present_share_buffer=1,
                **mha,
            )
        )
    else:
        inputs.append(v("write_at", TensorProto.INT64, [rows, HEADS, 3]))  # (row, head, column) of the new one
        shape = helper.make_tensor("heads", TensorProto.INT64, [3], [rows, HEADS, D_HEAD])
        initializers = [shape]
        for t in ("key", "value"):
            nodes += [
                helper.make_node("Reshape", [t, "heads"], [f"new_{t}"]),
                helper.make_node("ScatterND", [f"rows_{t}", "write_at", f"new_{t}"], [f"present_{t}"]),
            ]
        nodes.append(
            helper.make_node("MultiHeadAttention", ["query", "present_key", "present_value", "", "own"], ["out"], **mha)
        )
    graph = helper.make_graph(nodes, kind, inputs, outputs, initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return model.SerializeToString()


def _feeds(kind: str, rows: int, columns: int, np_dtype: Any, provider: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of a step at which every row has ``columns // 2`` cached positions (plus the new one), the rows
    reordered at random; ``clock``'s cache holds the same keys in the columns a clock would have put them in,
    ``dmmha``'s in the columns before the last, its keys in the layout of the provider's kernel."""
    rng = np.random.default_rng(seed)
    d_model = HEADS * D_HEAD
    held = columns // 2  # cached positions each row sees, besides the new one
    query, key, value = (rng.standard_normal((rows, 1, d_model)).astype(np_dtype) for _ in range(3))
    history_k, history_v = (rng.standard_normal((rows, HEADS, held, D_HEAD)).astype(np_dtype) for _ in range(2))
    group = np.arange(rows) // BEAM * BEAM
    reorder = (group + rng.integers(0, BEAM, rows)).astype(np.int64)  # each row continues one of its sentence's
    past_k = np.zeros((rows, HEADS, columns, D_HEAD), np_dtype)
    past_v = np.zeros_like(past_k)
    own = np.zeros((rows, columns), np.int32)
    if kind in ("shift", "plain"):  # right-aligned: the row's history in the last `held` columns before the new one
        past_k[:, :, columns - held :] = history_k
        past_v[:, :, columns - held :] = history_v
        own[:, columns - 1 - held :] = 1
        if kind == "plain":  # a past of T - 1 columns, which the step grows to T
            past_k, past_v = past_k[:, :, 1:].copy(), past_v[:, :, 1:].copy()
        return {"query": query, "key": key, "value": value, "reorder": reorder, "own": own,
                "past_key": past_k, "past_value": past_v}  # fmt: skip
    if kind in ("dmmha", "indirect"):  # the history in the `held` columns before the last, which the kernel writes
        past_k[:, :, columns - 1 - held : columns - 1] = history_k
        past_v[:, :, columns - 1 - held : columns - 1] = history_v
        own[:, columns - 1 - held :] = 1
        if provider == "cuda":  # CUDA's kernel reads keys as (rows, heads, d_head / x, T, x), x = 16 bytes of values
            x = 16 // np.dtype(np_dtype).itemsize
            past_k = np.ascontiguousarray(
                past_k.reshape(rows, HEADS, columns, D_HEAD // x, x).transpose(0, 1, 3, 2, 4)
            ).reshape(past_k.shape)
        feeds = {"query": query, "key": key, "value": value, "reorder": reorder, "own": own,
                 "past_key": past_k, "past_value": past_v}  # fmt: skip
        if kind == "indirect":  # the rows stay where they are; each reads its past from the row it continues
            del feeds["reorder"]
            beams = np.repeat((reorder % BEAM).astype(np.int32)[:, None], columns, axis=1)
            feeds["indirection"] = beams.reshape(rows // BEAM, BEAM, columns)
        return feeds
    step = columns + held  # the clock has gone round once: the columns hold positions step - held .. step - 1
    written = np.arange(step - held, step) % columns
    past_k[:, :, written] = history_k
    past_v[:, :, written] = history_v
    write = step % columns
    own[:, written] = 1
    own[:, write] = 1
    write_at = np.zeros((rows, HEADS, 3), np.int64)
    write_at[..., 0] = np.arange(rows)[:, None]
    write_at[..., 1] = np.arange(HEADS)[None, :]
    write_at[..., 2] = write
    return {"query": query, "key": key, "value": value, "reorder": reorder, "own": own,
            "past_key": past_k, "past_value": past_v, "write_at": write_at}  # fmt: skip


def _session(kind: str, rows: int, columns: int, dtype: int, provider: str, capture: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    providers: list[Any] = ["CPUExecutionProvider"]
    if provider == "cuda":
        options.enable_mem_pattern = not capture
        providers = [("CUDAExecutionProvider", {"enable_cuda_graph": "1" if capture else "0"})]
    return ort.InferenceSession(_graph(kind, rows, columns, dtype), options, providers=providers)


def _time(
    session: ort.InferenceSession, feeds: dict[str, np.ndarray], provider: str, repeats: int
) -> tuple[float, Any]:
    """µs a run (median), outputs bound to buffers of their own and inputs already on the device, and the
    attention's output (as the host reads it)."""
    device = ("cuda", 0) if provider == "cuda" else ("cpu", 0)
    binding = session.io_binding()
    held = {name: ort.OrtValue.ortvalue_from_numpy(array, *device) for name, array in feeds.items()}
    for name, value in held.items():
        binding.bind_ortvalue_input(name, value)
    outs = {}
    shared = "indirection" in feeds  # present written into the past's own buffer
    for output in session.get_outputs():
        if shared and output.name.startswith("present_"):
            binding.bind_ortvalue_output(output.name, held[output.name.replace("present_", "past_")])
            continue
        rows, heads, columns, d_head = feeds["past_key"].shape
        columns = feeds["own"].shape[1]
        shape = feeds["query"].shape if output.name == "out" else (rows, heads, columns, d_head)
        outs[output.name] = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), feeds["query"].dtype, *device)
        binding.bind_ortvalue_output(output.name, outs[output.name])
    for _ in range(20):
        session.run_with_iobinding(binding)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        session.run_with_iobinding(binding)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6, outs["out"].numpy()


def _timed(kind: str, rows: int, columns: int, args: Any, capture: bool) -> tuple[float, Any] | None:
    """``_time`` of a kind, or None where onnxruntime cannot run it (a kernel missing on the provider)."""
    dtype, np_dtype = (TensorProto.FLOAT16, np.float16) if args.dtype == "fp16" else (TensorProto.FLOAT, np.float32)
    try:
        session = _session(kind, rows, columns, dtype, args.provider, capture)
        return _time(session, _feeds(kind, rows, columns, np_dtype, args.provider), args.provider, args.repeats)
    except Exception as error:  # noqa: BLE001 (onnxruntime's own errors: reported, the others still timed)
        print(f"{kind} at {rows} rows, {columns} columns: {str(error).splitlines()[0][:200]}", flush=True)
        return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--rows", default="4,512")
    parser.add_argument("--columns", default="32,64,128")
    parser.add_argument("--dtype", choices=("fp32", "fp16"), default="fp32")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--no-capture", action="store_true", help="on CUDA, launch each run instead of a replay")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    capture = args.provider == "cuda" and not args.no_capture
    results = []
    print(f"onnxruntime {ort.__version__}, {args.provider}{' (captured)' if capture else ''}, {args.dtype}")
    others = KINDS[1:]
    print(f"| rows | columns | {' | '.join(f'{k} µs' for k in KINDS)} | {' | '.join(f'{k} / shift' for k in others)} "
          "| same output |")  # fmt: skip
    print("|---:|---:|" + "---:|" * (len(KINDS) + len(others)) + "---|")
    tolerance = 2e-2 if args.dtype == "fp16" else 1e-4
    for rows in (int(r) for r in args.rows.split(",")):
        for columns in (int(c) for c in args.columns.split(",")):
            timed = {kind: _timed(kind, rows, columns, args, capture) for kind in KINDS}
            shift = timed["shift"]
            assert shift is not None, "the static step's own layer did not run"
            row: dict[str, Any] = {"rows": rows, "columns": columns}
            cells, ratios, same = [], [], []
            for kind in KINDS:
                got = timed[kind]
                row[f"{kind}_us"] = got[0] if got else None
                cells.append(f"{got[0]:.1f}" if got else "n/a")
                if kind != "shift":
                    ratios.append(f"{got[0] / shift[0]:.2f}" if got else "n/a")
                    if got:
                        same.append(bool(np.allclose(shift[1], got[1], atol=tolerance, rtol=tolerance)))
            row["same_output"] = all(same)
            results.append(row)
            print(
                f"| {rows} | {columns} | {' | '.join(cells)} | {' | '.join(ratios)} | {row['same_output']} |",
                flush=True,
            )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            report = {"onnxruntime": ort.__version__, "provider": args.provider, "captured": capture}
            report |= {"dtype": args.dtype, "heads": HEADS, "d_head": D_HEAD, "results": results}
            json.dump(report, out, indent=1)
    return 0 if all(r["same_output"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
