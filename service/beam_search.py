"""Batched beam search on the host, numpy only; the model steps behind a small ``Stepper`` interface.

The search rules are those of the PyTorch reference decoder (training/decode.py, module docstring), so
both produce the same hypotheses token for token:

* every alive hypothesis proposes its ``k = min(2 * beam, V)`` best next tokens; proposals are ranked by
  score (sum of log-probabilities, float64), ties keeping hypothesis order, then token rank;
* walking down that ranking, an EOS finishes a hypothesis (score / len ** length_penalty, len counting
  EOS) and any other token extends one, until ``beam`` hypotheses are alive;
* hypotheses reaching the sentence's ``max_len`` tokens are finished as they are;
* a sentence is done when it holds ``beam`` finished hypotheses or none alive; it then leaves the batch.

With ``no_repeat_ngram`` n > 0 a hypothesis may not repeat an n-gram of pieces: a token that would end an
n-gram it already holds gets log-probability -inf (no renormalisation), EOS excepted; the proposals are
then its ``k`` best allowed tokens. The graph returns only a top-k, so each step asks it for ``k`` plus the
most tokens any hypothesis has banned: the allowed ones among those always include its ``k`` best, and the
walk never needs more than ``beam + 1`` of them, so the result is exactly that of the rules on the full
distribution (``tests/engine/test_beam_search_unit.py`` checks it against a brute-force search).

One more exit, which changes no output: a sentence also leaves as soon as its ``n_best`` best finished
hypotheses provably beat everything its alive ones can still become (``early_stop``). Log-probabilities are
at most 0, so a hypothesis with score ``s`` after ``t`` tokens can at best finish at
``s / L ** length_penalty`` for some length ``L`` in ``[t + 1, max_len]``: the larger of the two ends. When
the worst of the ``n_best`` best finished scores is strictly above that bound for every alive hypothesis,
nothing the rules above would still find can enter the top ``n_best``, so the result is the one the rules
above return (``tests/engine/test_beam_search_unit.py`` checks this on random trees). With a confident model
most sentences stop this way steps before their beam has filled up, which is most of the saved time.

The batch is a grid of ``[sentences, hyps]``: ``hyps`` is 1 at the first step and ``beam`` after (fewer
only when the vocabulary offers fewer candidates; such padding rows are ignored). Beam 1 is greedy search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


class Stepper(Protocol):
    """One decoder step over the current batch; owns the cache and the per-sentence encoder outputs."""

    def step(self, tokens: np.ndarray, reorder: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """tokens (B, H) int64, reorder (B*H,) int64 rows of the previous step's cache ->
        top-k log-probs (B, H, k) float32, top-k ids (B, H, k) int64, cross-attention (B, H, S) float32."""
        ...

    def keep(self, sentences: np.ndarray) -> None:
        """Keep only these sentences (indices into the current batch) for the following steps."""
        ...


@dataclass
class Finished:
    tokens: list[int]
    """Generated ids, EOS included when the hypothesis ended with it."""
    score: float
    """sum(token_logprobs) / len(tokens) ** length_penalty"""
    token_logprobs: list[float]
    attention: list[np.ndarray] = field(default_factory=list)
    """One cross-attention row per generated token over the source pieces + EOS (when asked for)."""


@dataclass
class _Alive:
    tokens: list[int]
    score: float
    token_logprobs: list[float]
    attention: list[np.ndarray]
    row: int  # the cache row holding this hypothesis' past, in the last step's output


def search(
    stepper: Stepper,
    source_lengths: list[int],
    max_lens: list[int],
    *,
    beam_size: int,
    length_penalty: float,
    n_best: int,
    vocab_size: int,
    bos_id: int,
    eos_id: int,
    with_attention: bool = False,
    early_stop: bool = True,
    no_repeat_ngram: int = 0,
) -> list[list[Finished]]:
    """The ``n_best`` best finished hypotheses of each sentence, best first.

    ``source_lengths`` counts source pieces without EOS (attention rows keep that many columns + EOS);
    ``max_lens`` caps each sentence's hypotheses, EOS included.
    """
    if beam_size < 1 or n_best < 1:
        raise ValueError(f"beam_size={beam_size} and n_best={n_best} must both be at least 1")
    if no_repeat_ngram < 0:
        raise ValueError(f"no_repeat_ngram={no_repeat_ngram} must be 0 (off) or more")
    k = min(2 * beam_size, vocab_size)
    alive = [[_Alive([], 0.0, [], [], row=i)] for i in range(len(max_lens))]
    finished: list[list[Finished]] = [[] for _ in max_lens]
    active = list(range(len(max_lens)))  # sentence indices, in the order of the current batch
    step = 0

    def finish(s: int, tokens: list[int], score: float, lps: list[float], rows: list[np.ndarray]) -> None:
        finished[s].append(Finished(tokens, score / max(1, len(tokens)) ** length_penalty, lps, rows))

    while active:
        hyps = max(len(alive[s]) for s in active)
        token_rows, score_rows, reorder_list = [], [], []
        for s in active:
            pad = hyps - len(alive[s])  # padding rows repeat the sentence's last hypothesis, scored -inf
            token_rows.append([hyp.tokens[-1] if hyp.tokens else bos_id for hyp in alive[s]] + [bos_id] * pad)
            score_rows.append([hyp.score for hyp in alive[s]] + [-np.inf] * pad)
            reorder_list += [hyp.row for hyp in alive[s]] + [alive[s][-1].row] * pad
        tokens = np.array(token_rows, dtype=np.int64)
        scores = np.array(score_rows, dtype=np.float64)
        reorder = np.array(reorder_list, dtype=np.int64)
        banned = (
            [[banned_tokens(h.tokens, no_repeat_ngram) for h in alive[s]] for s in active] if no_repeat_ngram else None
        )
        extra = max((len(b) for rows in banned for b in rows), default=0) if banned else 0
        top_lp, top_ids, attention = stepper.step(tokens, reorder, min(k + extra, vocab_size))
        width = top_ids.shape[2]
        candidates = scores[:, :, None] + top_lp.astype(np.float64)
        # Stable sort on the negated score = the reference's sort: ties keep (hypothesis, rank) order.
        ranking = np.argsort(-candidates.reshape(len(active), -1), axis=1, kind="stable")
        # Python lists once per step: indexing numpy arrays element by element costs more than the search
        ranked, ids_l, lp_l, scores_l = ranking.tolist(), top_ids.tolist(), top_lp.tolist(), candidates.tolist()
        still: list[int] = []
        for b, s in enumerate(active):
            parents = alive[s]
            grown: list[_Alive] = []
            for flat in ranked[b]:
                i, r = divmod(flat, width)
                if i >= len(parents):
                    break  # padding rows score -inf and sort last: the real proposals are used up
                parent = parents[i]
                token = ids_l[b][i][r]
                if banned is not None and token in banned[b][i]:
                    continue
                lps = [*parent.token_logprobs, lp_l[b][i][r]]
                rows = (
                    [*parent.attention, attention[b, i, : source_lengths[s] + 1]]
                    if with_attention
                    else parent.attention
                )
                score = scores_l[b][i][r]
                if token == eos_id:
                    finish(s, [*parent.tokens, token], score, lps, rows)
                else:
                    grown.append(_Alive([*parent.tokens, token], score, lps, rows, row=b * hyps + i))
                    if len(grown) == beam_size:
                        break
            if step + 1 >= max_lens[s]:
                for hyp in grown:
                    finish(s, hyp.tokens, hyp.score, hyp.token_logprobs, hyp.attention)
                grown = []
            alive[s] = grown
            if (
                grown
                and len(finished[s]) < beam_size
                and not (early_stop and _settled(finished[s], grown, n_best, max_lens[s], length_penalty))
            ):
                still.append(b)
        step += 1
        if len(still) < len(active):
            active = [active[b] for b in still]
            if active:
                stepper.keep(np.array(still, dtype=np.int64))
    for outputs in finished:
        outputs.sort(key=lambda o: -o.score)
    return [outputs[:n_best] for outputs in finished]


def banned_tokens(tokens: list[int], n: int) -> set[int]:
    """Tokens that would complete an n-gram ``tokens`` already holds (EOS is never among ``tokens``)."""
    if n < 1 or len(tokens) < n - 1:
        return set()
    if n == 1:
        return set(tokens)
    tail = tokens[len(tokens) - n + 1 :]
    first = tail[0]
    return {
        tokens[j + n - 1] for j in range(len(tokens) - n + 1) if tokens[j] == first and tokens[j : j + n - 1] == tail
    }


def _settled(finished: list[Finished], alive: list[_Alive], n_best: int, max_len: int, length_penalty: float) -> bool:
    """The ``n_best`` best finished hypotheses beat the best score any alive one can still reach."""
    if len(finished) < n_best:
        return False
    worst_kept = sorted((f.score for f in finished), reverse=True)[n_best - 1]
    reachable = max(
        max(hyp.score / (len(hyp.tokens) + 1) ** length_penalty, hyp.score / max(max_len, 1) ** length_penalty)
        for hyp in alive
    )
    return worst_kept > reachable
