"""Reference decoders in PyTorch: plain, recomputing every prefix, so they are easy to trust.

They define the search that the service's ONNX engine must reproduce exactly:

* the source is ``pieces + [EOS]``; the target starts from ``bos_id``; padding and BOS are never
  generated (their log-probability is -inf: ``Transformer.next_token_logprobs``);
* a hypothesis' score is the sum of its token log-probabilities; a finished one is ranked by
  ``score / len ** length_penalty`` where ``len`` counts its tokens, EOS included;
* each step, every alive hypothesis proposes its ``min(2 * beam, V)`` best next tokens; all proposals
  are ranked by score (ties keep hypothesis order, then token rank); walking down that list, an EOS
  proposal finishes a hypothesis and any other extends one, until ``beam`` hypotheses are alive;
* hypotheses that reach ``max_len`` tokens without EOS are finished as they are;
* a sentence is done once it has ``beam`` finished hypotheses or none alive; the ``n_best`` best
  finished ones are returned. Beam 1 is greedy search.
* with ``no_repeat_ngram`` n > 0, a token that would end an n-gram the hypothesis already holds gets
  log-probability -inf before the proposals are taken (no renormalisation; EOS is never banned).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from training.model import Transformer


@dataclass
class Output:
    tokens: list[int]  # generated ids, EOS included when the hypothesis finished with it
    score: float  # length-normalised
    token_logprobs: list[float]


def source_tensor(model: Transformer, batch: list[list[int]]) -> Tensor:
    """Right-padded (B, S) ids with EOS appended to every source."""
    cfg = model.config
    rows = [ids + [cfg.eos_id] for ids in batch]
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), cfg.pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


@torch.no_grad()
def next_logprobs(model: Transformer, memory: Tensor, src: Tensor, prefixes: Tensor) -> Tensor:
    """Log-probabilities (B, V) of the token after each prefix (prefixes start with BOS)."""
    logits, _ = model.decode(prefixes, memory, src)
    return model.next_token_logprobs(logits[:, -1])


def ban_repeats(logp: Tensor, hypotheses: list[list[int]], n: int, eos_id: int) -> Tensor:
    """``logp`` (H, V) with -inf on every token that would repeat an n-gram of its hypothesis."""
    if n < 1:
        return logp
    logp = logp.clone()
    for row, tokens in enumerate(hypotheses):
        grams = {tuple(tokens[j : j + n]) for j in range(len(tokens) - n + 1)}
        context = tuple(tokens[len(tokens) - n + 1 :]) if n > 1 else ()
        for gram in grams:
            if gram[:-1] == context and gram[-1] != eos_id:
                logp[row, gram[-1]] = float("-inf")
    return logp


@torch.no_grad()
def greedy(
    model: Transformer,
    batch: list[list[int]],
    max_lens: list[int],
    length_penalty: float = 1.0,
    no_repeat_ngram: int = 0,
) -> list[Output]:
    """Batched greedy search; identical to beam_search with beam 1."""
    model.eval()
    cfg = model.config
    src = source_tensor(model, batch)
    memory = model.encode(src)
    prefixes = torch.full((len(batch), 1), cfg.bos_id, dtype=torch.long)
    outputs = [Output([], 0.0, []) for _ in batch]
    done = [False] * len(batch)
    for step in range(max(max_lens)):
        logp = next_logprobs(model, memory, src, prefixes)
        logp = ban_repeats(logp, [o.tokens for o in outputs], no_repeat_ngram, cfg.eos_id)
        best_lp, best = logp.max(dim=-1)
        for i in range(len(batch)):
            if done[i]:
                continue
            token = int(best[i])
            outputs[i].tokens.append(token)
            outputs[i].token_logprobs.append(float(best_lp[i]))
            outputs[i].score += float(best_lp[i])
            if token == cfg.eos_id or step + 1 >= max_lens[i]:
                done[i] = True
        if all(done):
            break
        prefixes = torch.cat([prefixes, best[:, None]], dim=1)
    for out in outputs:
        out.score /= max(1, len(out.tokens)) ** length_penalty
    return outputs


@torch.no_grad()
def beam_search(
    model: Transformer,
    source: list[int],
    beam_size: int,
    max_len: int,
    length_penalty: float = 1.0,
    n_best: int = 1,
    no_repeat_ngram: int = 0,
) -> list[Output]:
    """Beam search for one sentence, following the rules in this module's docstring."""
    model.eval()
    cfg = model.config
    src = source_tensor(model, [source])
    memory = model.encode(src)
    alive: list[tuple[list[int], float, list[float]]] = [([], 0.0, [])]
    finished: list[Output] = []

    def finish(tokens: list[int], score: float, lps: list[float]) -> None:
        finished.append(Output(tokens, score / max(1, len(tokens)) ** length_penalty, lps))

    for step in range(max_len):
        prefixes = torch.tensor([[cfg.bos_id] + t for t, _, _ in alive], dtype=torch.long)
        n = len(alive)
        logp = next_logprobs(model, memory.expand(n, -1, -1), src.expand(n, -1), prefixes)
        logp = ban_repeats(logp, [t for t, _, _ in alive], no_repeat_ngram, cfg.eos_id)
        top_lp, top_ids = logp.topk(min(2 * beam_size, logp.size(-1)), dim=-1)
        candidates = [(alive[i][1] + float(top_lp[i, r]), i, r) for i in range(n) for r in range(top_lp.size(1))]
        candidates.sort(key=lambda c: -c[0])
        next_alive: list[tuple[list[int], float, list[float]]] = []
        for score, i, r in candidates:
            token, lp = int(top_ids[i, r]), float(top_lp[i, r])
            tokens, lps = alive[i][0] + [token], alive[i][2] + [lp]
            if token == cfg.eos_id:
                finish(tokens, score, lps)
            else:
                next_alive.append((tokens, score, lps))
                if len(next_alive) == beam_size:
                    break
        if step + 1 >= max_len:
            for tokens, score, lps in next_alive:
                finish(tokens, score, lps)
            next_alive = []
        alive = next_alive
        if len(finished) >= beam_size or not alive:
            break
    finished.sort(key=lambda o: -o.score)
    return finished[:n_best]


@torch.no_grad()
def attention_map(model: Transformer, source: list[int], tokens: list[int], layer: int = -1) -> Tensor:
    """Cross-attention (len(tokens), len(source) + 1) of one layer, heads averaged, by teacher forcing."""
    cfg = model.config
    src = source_tensor(model, [source])
    tgt_in = torch.tensor([[cfg.bos_id] + tokens[:-1] if tokens else [cfg.bos_id]], dtype=torch.long)
    _, weights = model.decode(tgt_in, model.encode(src), src, attention_layer=layer)
    return weights[0].mean(dim=0)[: len(tokens)]


def strip_eos(tokens: list[int], eos_id: int) -> list[int]:
    return tokens[:-1] if tokens and tokens[-1] == eos_id else tokens
