"""Ancestral sampling over a running set, numpy only; the model behind a ``beam_search.Stepper``.

Each sentence draws one hypothesis, token by token, from the model's distribution: at every step the next
token is drawn from ``softmax(logits / 1)`` over the whole vocabulary (``top_k=0``) or over its ``top_k``
most likely tokens, renormalised. A sentence ends at EOS or at its ``max_len`` tokens (EOS included), and
then leaves the set. Back-translation uses it (Edunov et al. 2018, "Understanding Back-Translation at
Scale": sampled synthetic sources beat beam output when the synthetic data is plentiful); the server does
not.

The draws come from the caller's ``numpy.random.Generator``, one uniform number per running sentence and
step, in set order, so a seeded generator and the same sentences give the same samples. ``top_k=1`` is
greedy search: the same tokens as beam search with beam 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inference.beam_search import Stepper


@dataclass
class Sample:
    tokens: list[int]
    """Drawn ids, EOS included when the sentence ended with it."""
    token_logprobs: list[float]
    """log p of each drawn token under the full distribution (before any top-k restriction)."""


def sample(
    stepper: Stepper,
    sources: list[list[int]],
    max_lens: list[int],
    *,
    vocab_size: int,
    bos_id: int,
    eos_id: int,
    rng: np.random.Generator,
    top_k: int = 0,
) -> list[Sample]:
    """One sample per source (ids without EOS), in order; ``max_lens`` caps each one's tokens, EOS included."""
    if len(max_lens) != len(sources):
        raise ValueError(f"{len(sources)} sources but {len(max_lens)} max_lens")
    if top_k < 0 or any(n < 1 for n in max_lens):
        raise ValueError("top_k must be 0 (whole vocabulary) or more, and every max_len at least 1")
    if not sources:
        return []
    k = vocab_size if top_k == 0 else min(top_k, vocab_size)
    stepper.admit([list(ids) for ids in sources])
    results = [Sample([], []) for _ in sources]
    running = list(range(len(sources)))  # sentence of each row of the set, in the stepper's order
    rows = np.zeros(len(sources), dtype=np.int64)  # each running sentence's row in the last step's cache
    position = 0
    while running:
        tokens = np.array([[results[i].tokens[-1] if position else bos_id] for i in running], dtype=np.int64)
        positions = np.full(len(running), position, dtype=np.int64)
        top_lp, top_ids, _ = stepper.step(tokens, positions, rows, k, attention=False)
        logprobs = top_lp[:, 0, :].astype(np.float64)
        weights = np.exp(logprobs)
        cumulative = np.cumsum(weights, axis=1)
        draws = rng.random(len(running)) * cumulative[:, -1]
        picks = np.minimum((cumulative < draws[:, None]).sum(axis=1), k - 1)
        position += 1
        kept: list[int] = []
        for b, sentence in enumerate(running):
            token = int(top_ids[b, 0, picks[b]])
            out = results[sentence]
            out.tokens.append(token)
            out.token_logprobs.append(float(logprobs[b, picks[b]]))
            if token != eos_id and position < max_lens[sentence]:
                kept.append(b)
        if len(kept) < len(running):
            stepper.keep(np.array(kept, dtype=np.int64))
            running = [running[b] for b in kept]
        rows = np.array(kept, dtype=np.int64)
    return results
