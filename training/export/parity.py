"""ONNX Runtime vs PyTorch: do the exported graphs compute what the model computes?

The decoder graph is driven step by step the way beam search drives it (one hypothesis per sentence at the
first step, several after, cache rows picked by ``reorder``), and each step is compared with the model run
on the whole prefix, as the reference decoder does: top-k log-probabilities, the self-attention cache, the
chosen layer's cross-attention, plus the encoder's cross-attention keys and values.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from torch import Tensor

from core.bundle import DECODER_FILE, ENCODER_FILE
from core.graphs import cache_names
from core.tokenizer import Tokenizer
from inference.threads import session_options
from training.decode import source_tensor
from training.export.common import ExportError
from training.incremental import decoder_layers
from training.model import Transformer

log = logging.getLogger(__name__)

MIN_PROB = 1e-4
_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


@dataclass
class ParityReport:
    """Largest absolute differences between ONNX Runtime and PyTorch over every compared value."""

    sentences: int
    steps: int
    cross_kv: float
    logprobs: float
    """Over the top-k candidates PyTorch gives at least ``MIN_PROB``, the ones that matter to search."""
    logprobs_tail: float
    """Over every top-k candidate, however unlikely (quantization errors grow in the far tail)."""
    cache: float
    attention: float
    top1_agreement: float
    """Share of rows where ORT's best token is PyTorch's best token (1.0 unless two are nearly tied)."""

    @property
    def max_abs_diff(self) -> float:
        """What the export is judged by: the probabilities decoding sees (log-probs, attention). Cache and
        K/V differences are reported but scale with the activations, so they make a poor threshold."""
        return max(self.logprobs, self.attention)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "max_abs_diff": self.max_abs_diff}


def _diff(a: np.ndarray | Tensor, b: np.ndarray | Tensor) -> float:
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.shape != b.shape:
        raise AssertionError(f"shape mismatch: ONNX {a.shape} vs PyTorch {b.shape}")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


@torch.no_grad()
def compare(
    model: Transformer,
    encoder: ort.InferenceSession,
    decoder: ort.InferenceSession,
    sources: list[list[int]],
    targets: list[list[int]] | None = None,
    *,
    hyps: int = 3,
    steps: int = 6,
    k: int = 4,
    attention_layer: int = -1,
    seed: int = 0,
) -> ParityReport:
    """Run both sides on ``sources``; with ``targets`` every step feeds the real next target token (one
    hypothesis per sentence), otherwise ``hyps`` hypotheses per sentence follow random tokens and a random
    cache reorder for ``steps`` steps."""
    model.eval()
    cfg = model.config
    rng = random.Random(seed)
    float_type = _NUMPY_TYPES[next(i.type for i in decoder.get_inputs() if i.name == "past_k_0")]
    src = source_tensor(model, sources)
    src_mask, *cross = encoder.run(None, {"src_ids": src.numpy()})
    memory = model.encode(src)  # the reference: the model's own encoder and cross-attention projections
    ref_cross = [t for layer in decoder_layers(model) for t in layer.cross_attn.project_kv(memory)]
    # at real source positions only: the encoder graph leaves zeros at padding, which the mask hides
    real = (src != cfg.pad_id).numpy()[:, None, :, None]
    cross_diff = max(
        _diff(np.where(real, ours, 0.0), np.where(real, ref.detach().numpy(), 0.0))
        for ours, ref in zip(cross, ref_cross, strict=True)
    )
    cross_in = dict(zip(cache_names("cross", cfg.decoder_layers), cross, strict=True))
    if not np.array_equal(src_mask, (src == cfg.pad_id).numpy()):
        raise AssertionError("the encoder's src_mask differs from PyTorch's padding mask")

    captured: dict[str, list[Tensor]] = {"k": [], "v": []}
    hooks = []
    layers = decoder_layers(model)
    for layer in layers:
        attn = layer.self_attn
        hooks.append(attn.k_proj.register_forward_hook(lambda m, i, o: captured["k"].append(o)))
        hooks.append(attn.v_proj.register_forward_hook(lambda m, i, o: captured["v"].append(o)))

    batch = len(sources)
    heads, d_head = cfg.n_heads, cfg.d_model // cfg.n_heads
    n_steps = max(len(t) for t in targets) + 1 if targets else steps
    n_steps = min(n_steps, cfg.max_positions)
    rows_per_sentence = 1
    prefixes: list[list[int]] = [[cfg.bos_id] for _ in range(batch)]
    reorder = np.arange(batch, dtype=np.int64)
    cache_in = cache_names("past", cfg.decoder_layers)
    cache = [np.zeros((batch, heads, 0, d_head), dtype=float_type) for _ in cache_in]
    lp_diff = tail_diff = cache_diff = attn_diff = 0.0
    agree = total = 0
    try:
        for step in range(n_steps):
            tokens = np.array([p[-1] for p in prefixes], dtype=np.int64).reshape(batch, -1)
            top_lp, top_ids, attention, *cache = decoder.run(
                None,
                {
                    "tokens": tokens,
                    "positions": np.full(batch, step, dtype=np.int64),
                    "reorder": reorder,
                    "src_mask": src_mask,
                    **cross_in,
                    "k": np.array([k], dtype=np.int64),
                    **dict(zip(cache_in, cache, strict=True)),
                },
            )
            sentence = torch.arange(batch).repeat_interleave(rows_per_sentence)
            captured["k"].clear()
            captured["v"].clear()
            logits, weights = model.decode(
                torch.tensor(prefixes), memory[sentence], src[sentence], attention_layer=attention_layer
            )
            logp = model.next_token_logprobs(logits[:, -1])
            ids = torch.from_numpy(top_ids.reshape(len(prefixes), -1))
            onnx_lp, torch_lp = top_lp.reshape(len(prefixes), -1), logp.gather(1, ids).numpy()
            likely = torch_lp >= np.log(MIN_PROB)
            lp_diff = max(lp_diff, _diff(onnx_lp[likely], torch_lp[likely]))
            tail_diff = max(tail_diff, _diff(onnx_lp, torch_lp))
            agree += int((logp.argmax(dim=-1) == ids[:, 0]).sum())
            total += len(prefixes)
            for i, layer in enumerate(layers):
                ref_k = layer.self_attn.split_heads(captured["k"][i])
                ref_v = layer.self_attn.split_heads(captured["v"][i])
                cache_diff = max(cache_diff, _diff(cache[2 * i], ref_k), _diff(cache[2 * i + 1], ref_v))
            ref_attention = weights[:, :, -1].mean(dim=1)
            attn_diff = max(attn_diff, _diff(attention.reshape(len(prefixes), -1), ref_attention))

            # Next step: which previous row each hypothesis continues, and the token it appends.
            new_rows = 1 if targets else hyps
            reorder = np.array(
                [
                    b * rows_per_sentence + rng.randrange(rows_per_sentence) if not targets else b
                    for b in range(batch)
                    for _ in range(new_rows)
                ],
                dtype=np.int64,
            )
            if targets:
                nxt = [t[step] if step < len(t) else cfg.eos_id for t in targets]
            else:
                nxt = [rng.randrange(4, cfg.vocab_size) for _ in reorder]
            prefixes = [prefixes[row] + [tok] for row, tok in zip(reorder, nxt, strict=True)]
            rows_per_sentence = new_rows
    finally:
        for hook in hooks:
            hook.remove()
    return ParityReport(
        sentences=batch,
        steps=n_steps,
        cross_kv=cross_diff,
        logprobs=lp_diff,
        logprobs_tail=tail_diff,
        cache=cache_diff,
        attention=attn_diff,
        top1_agreement=agree / max(1, total),
    )


def random_sources(model: Transformer, n: int = 4, max_len: int = 12, seed: int = 0) -> list[list[int]]:
    """Random ids (no special tokens) of mixed lengths, so padding is exercised too."""
    rng = random.Random(seed)
    vocab = model.config.vocab_size
    limit = min(max_len, model.config.max_positions - 1)
    return [[rng.randrange(4, vocab) for _ in range(rng.randint(1, limit))] for _ in range(n)]


REAL_PARITY_SENTENCES = 16


def parity_providers(mode: str) -> list[str]:
    """fp16 graphs are checked on the GPU when onnxruntime has a usable one (that is where they run);
    everything else on the CPU, the reference platform of the tolerances."""
    if mode == "fp16":
        from inference.engine import choose_providers

        return choose_providers("auto")
    return ["CPUExecutionProvider"]


def sessions(bundle: Path, providers: list[str]) -> tuple[ort.InferenceSession, ort.InferenceSession]:
    options = session_options()
    return (
        ort.InferenceSession(str(bundle / ENCODER_FILE), options, providers=providers),
        ort.InferenceSession(str(bundle / DECODER_FILE), options, providers=providers),
    )


def check_parity(
    model: Transformer,
    bundle: Path,
    tokenizer: Tokenizer,
    test_file: str | Path | None,
    attention_layer: int,
    mode: str,
    tolerance: float,
) -> dict[str, Any]:
    try:
        encoder, decoder = sessions(bundle, parity_providers(mode))
    except Exception as err:  # onnxruntime raises its own exception types
        if mode != "fp16":
            raise
        # The CPU provider lacks fp16 kernels for some ops; the check then needs a GPU machine.
        log.warning("parity check skipped: onnxruntime cannot run the fp16 graphs on CPU: %s", err)
        return {"skipped": f"onnxruntime CPU cannot run fp16 graphs: {str(err)[:200]}"}
    reports: dict[str, ParityReport] = {}
    try:
        reports["random"] = compare(model, encoder, decoder, random_sources(model), attention_layer=attention_layer)
        if test_file:
            sources, targets = real_inputs(model, tokenizer, test_file)
            reports["real"] = compare(model, encoder, decoder, sources, targets, attention_layer=attention_layer)
    except Exception as err:
        if mode != "fp16" or "NOT_IMPLEMENTED" not in str(err):
            raise
        log.warning("parity check skipped: onnxruntime cannot run the fp16 graphs on CPU: %s", err)
        return {"skipped": f"onnxruntime CPU cannot run fp16 graphs: {str(err)[:200]}"}
    result: dict[str, Any] = {"tolerance": tolerance, "provider": decoder.get_providers()[0]}
    for kind, report in reports.items():
        result[kind] = report.to_dict()
        log.info(
            "parity (%s inputs): max |ONNX - PyTorch|: log-probs %.3g (any top-k: %.3g), attention %.3g, "
            "cache %.3g, cross K/V %.3g; top-1 agreement %.3f",
            kind,
            report.logprobs,
            report.logprobs_tail,
            report.attention,
            report.cache,
            report.cross_kv,
            report.top1_agreement,
        )
        if report.max_abs_diff > tolerance:
            raise ExportError(
                f"parity check failed on {kind} inputs: max |ONNX - PyTorch| of log-probs and attention = "
                f"{report.max_abs_diff:.3g} "
                f"> tolerance {tolerance:g} ({json.dumps(report.to_dict())}); the export is wrong or the "
                "tolerance too tight for this dtype (--tolerance)"
            )
    return result


def real_inputs(
    model: Transformer, tokenizer: Tokenizer, test_file: str | Path
) -> tuple[list[list[int]], list[list[int]]]:
    from training.data import read_pairs

    pairs = read_pairs(test_file)[:REAL_PARITY_SENTENCES]
    if not pairs:
        raise ExportError(f"--test-file {test_file} holds no sentence pairs")
    limit = model.config.max_positions - 1
    sources = [tokenizer.encode_source(s)[:limit] for s, _ in pairs]
    targets = [tokenizer.encode_target(t)[:limit] for _, t in pairs]
    return sources, targets
