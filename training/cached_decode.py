"""Greedy search with a self-attention cache, in PyTorch, for dev evaluation during training.

The reference ``training.decode.greedy`` recomputes every prefix at every step (easy to trust, quadratic in
length); this one runs the export's incremental graphs (``EncoderGraph``, ``DecoderStep``) eagerly, so a step
costs one token per sentence, and finished sentences leave the batch. Same search, same tokens
(tests/training/test_cached_decode.py); the dev BLEU/chrF it feeds cost a few seconds instead of minutes.
"""

from __future__ import annotations

import torch

from training.decode import Output, source_tensor
from training.incremental import DecoderStep, EncoderGraph
from training.model import Transformer


@torch.no_grad()
def cached_greedy(
    model: Transformer, batch: list[list[int]], max_lens: list[int], length_penalty: float = 1.0
) -> list[Output]:
    """Greedy outputs for ``batch`` (source ids without EOS), each capped at ``max_lens[i]`` tokens."""
    model.eval()
    cfg = model.config
    device = next(model.parameters()).device
    src = source_tensor(model, batch).to(device)
    src_mask, *cross = EncoderGraph(model)(src)
    step_graph = DecoderStep(model).to(device)
    heads, d_head = cfg.n_heads, cfg.d_model // cfg.n_heads
    past = [torch.zeros(len(batch), heads, 0, d_head, device=device) for _ in range(2 * cfg.decoder_layers)]
    alive = list(range(len(batch)))
    tokens = torch.full((len(batch), 1), cfg.bos_id, dtype=torch.long, device=device)
    one = torch.tensor(1, device=device)
    outputs = [Output([], 0.0, []) for _ in batch]
    for step in range(max(max_lens, default=0)):
        rows = torch.arange(len(alive), device=device)
        positions = torch.full((len(alive),), step, dtype=torch.long, device=device)
        top_lp, top_ids, _, *past = step_graph(tokens, positions, rows, one, src_mask, *cross, *past)
        keep = []
        for row, index in enumerate(alive):
            token, logprob = int(top_ids[row, 0, 0]), float(top_lp[row, 0, 0])
            out = outputs[index]
            out.tokens.append(token)
            out.token_logprobs.append(logprob)
            out.score += logprob
            if token != cfg.eos_id and step + 1 < max_lens[index]:
                keep.append(row)
        if not keep:
            break
        if len(keep) < len(alive):
            selected = torch.tensor(keep, device=device)
            alive = [alive[row] for row in keep]
            src_mask, cross, past = src_mask[selected], [t[selected] for t in cross], [t[selected] for t in past]
            tokens = top_ids[selected, 0, :1]
        else:
            tokens = top_ids[:, 0, :1]
    for out in outputs:
        out.score /= max(1, len(out.tokens)) ** length_penalty
    return outputs
