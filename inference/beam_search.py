"""Beam search over a running set of sentences, step by step, numpy only; the model behind a ``Stepper``.

The search rules are those of the PyTorch reference decoder (training/decode.py, module docstring), so
both produce the same hypotheses token for token:

* every alive hypothesis proposes its ``k = min(2 * beam, V)`` best next tokens; proposals are ranked by
  score (sum of log-probabilities, float64), ties keeping hypothesis order, then token rank;
* walking down that ranking, an EOS finishes a hypothesis (score / len ** length_penalty, len counting
  EOS) and any other token extends one, until ``beam`` hypotheses are alive;
* hypotheses reaching the sentence's ``max_len`` tokens are finished as they are;
* a sentence is done when it holds ``beam`` finished hypotheses or none alive; it then leaves the set.

With ``no_repeat_ngram`` n > 0 a hypothesis may not repeat an n-gram of pieces: a token that would end an
n-gram it already holds gets log-probability -inf (no renormalisation), EOS excepted; the proposals are
then its ``k`` best allowed tokens. The graph returns only a top-k, so each step asks it for ``k`` plus the
most tokens any hypothesis has banned: the allowed ones among those always include its ``k`` best, and the
walk never needs more than ``beam + 1`` of them, so the result is exactly that of the rules on the full
distribution (``tests/inference/test_beam_search_unit.py`` checks it against a brute-force search). The same
argument lets sentences with different beam sizes share one step: the graph's ``k`` is that of the widest.

One more exit, which changes no output: a sentence also leaves as soon as its ``n_best`` best finished
hypotheses provably beat everything its alive ones can still become (``early_stop``). Log-probabilities are
at most 0, so a hypothesis with score ``s`` after ``t`` tokens can at best finish at
``s / L ** length_penalty`` for some length ``L`` in ``[t + 1, max_len]``: the larger of the two ends. When
the worst of the ``n_best`` best finished scores is strictly above that bound for every alive hypothesis,
nothing the rules above would still find can enter the top ``n_best``.

**The running set.** Sentences enter (:meth:`BeamSearch.admit`) and leave (done, or :meth:`BeamSearch.drop`)
between two steps, each with its own options; a sentence's hypotheses only ever see their own sentence, so
its result does not depend on what else shares the set (``tests/inference`` checks it token for token). The
set is a grid of ``[sentences, hyps]``: ``hyps`` is the most alive hypotheses of any sentence (1 for a set of
new sentences, ``beam`` after); a sentence with fewer fills its rows with copies scored -inf, which are
ignored. Each sentence carries its own position (tokens generated so far), which is how the graph knows
which of the cached keys are its own. Beam 1 is greedy search.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np


class Stepper(Protocol):
    """The model side of a running set: encoder outputs per sentence and the self-attention cache."""

    def admit(self, sources: list[list[int]]) -> None:
        """Encode these sources (ids without EOS) and append them to the set, after the current sentences."""
        ...

    def step(
        self, tokens: np.ndarray, positions: np.ndarray, reorder: np.ndarray, k: int, attention: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """tokens (B, H) int64, positions (B,) int64 tokens each sentence generated so far, reorder (B*H,)
        int64 rows of the previous step's cache (any row for a sentence at position 0) ->
        top-k log-probs (B, H, k) float32, top-k ids (B, H, k) int64 (distinct within a row, best first),
        cross-attention (B, H, S) float32, or None when ``attention`` is False (no sentence asked for it: on a
        GPU that is a copy to the host fewer a step)."""
        ...

    def keep(self, sentences: np.ndarray) -> None:
        """Keep only these sentences (indices into the current set, in order) for the following steps."""
        ...


@dataclass(frozen=True)
class SearchOptions:
    """How one sentence is searched; sentences with different options share a running set."""

    beam_size: int = 4
    length_penalty: float = 1.0
    n_best: int = 1
    max_len: int = 256
    """Cap on a hypothesis' tokens, EOS included."""
    no_repeat_ngram: int = 0
    with_attention: bool = False
    early_stop: bool = True

    def check(self) -> None:
        if self.beam_size < 1 or self.n_best < 1:
            raise ValueError(f"beam_size={self.beam_size} and n_best={self.n_best} must both be at least 1")
        if self.no_repeat_ngram < 0:
            raise ValueError(f"no_repeat_ngram={self.no_repeat_ngram} must be 0 (off) or more")
        if self.max_len < 1:
            raise ValueError(f"max_len={self.max_len} must be at least 1")


@dataclass
class Finished:
    tokens: list[int]
    """Generated ids, EOS included when the hypothesis ended with it."""
    score: float
    """sum(token_logprobs) / len(tokens) ** length_penalty"""
    token_logprobs: list[float]
    attention: list[np.ndarray] = field(default_factory=list)
    """One cross-attention row per generated token over the source pieces + EOS (when asked for)."""


_Hyp = tuple  # (token, logprob, attention row or None, parent _Hyp or None, score, cache row, length, tokens)
"""A hypothesis, as a link to the one it extends (a plain tuple: a search step makes hundreds, and a tuple is
the cheapest object Python builds). Growing one costs the same at any length; its tokens are read back by
following the links (:func:`_path`) only when it is returned. ``length`` counts its tokens; the empty start
hypothesis of a sentence has no parent and length 0. ``tokens``: with an n-gram guard, its tokens as a tuple
(the guard reads them at every step, and one tuple a grown hypothesis costs less than walking the links each
time: bench search-cost); None without."""
_TOKEN, _LOGPROB, _ATTENTION, _PARENT, _SCORE, _ROW, _LENGTH, _TOKENS = range(8)
_FED = operator.itemgetter(_TOKEN, _SCORE, _ROW)
"""What a step feeds the graph of a hypothesis: its last token, its score and its cache row."""
_TOKENS_OF = operator.itemgetter(_TOKENS)
ARRAYS_FROM = 64
"""Sets of at least this many sentences choose their proposals with numpy (``BeamSearch._choose_arrays``); smaller
ones walk them in Python (``_choose_walk``): the same choices."""


def _start(guarded: bool) -> _Hyp:
    return (-1, 0.0, None, None, 0.0, 0, 0, () if guarded else None)


def _path(hyp: _Hyp) -> tuple[list[int], list[float], list[np.ndarray]]:
    """A hypothesis' tokens, their log-probabilities and attention rows (those recorded), from the first."""
    tokens, lps, rows = [], [], []
    while hyp[_PARENT] is not None:
        tokens.append(hyp[_TOKEN])
        lps.append(hyp[_LOGPROB])
        if hyp[_ATTENTION] is not None:
            rows.append(hyp[_ATTENTION])
        hyp = hyp[_PARENT]
    return tokens[::-1], lps[::-1], rows[::-1]


@dataclass
class _Sentence:
    key: Hashable
    source_len: int
    options: SearchOptions
    alive: list[_Hyp]
    finished: list[tuple[float, _Hyp]] = field(default_factory=list)
    """(score / len ** length_penalty, hypothesis) of every finished one, in the order they finished."""
    position: int = 0

    def result(self) -> list[Finished]:
        best = sorted(self.finished, key=lambda f: -f[0])[: self.options.n_best]  # stable: ties keep that order
        results = []
        for score, hyp in best:
            tokens, lps, rows = _path(hyp)
            results.append(Finished(tokens, score, lps, rows))
        return results


class _Ranked(NamedTuple):
    """A step's proposals, ranked per sentence: what the two ways of choosing among them read."""

    ranking: np.ndarray
    """(sentences, depth) indices into a sentence's hypotheses x k proposals, best first"""
    flat: np.ndarray
    """(sentences, hypotheses x k) scores, float64"""
    top_ids: np.ndarray
    """(sentences, hypotheses x k) token ids"""
    top_lp: np.ndarray
    """(sentences, hypotheses x k) log-probabilities"""
    attention: np.ndarray | None
    width: int
    """k: proposals a hypothesis"""
    hyps: int
    """hypotheses a sentence in this step"""


class BeamSearch:
    """A running set of sentences: admit between steps, one :meth:`step` for all, results as they finish."""

    def __init__(self, stepper: Stepper, *, vocab_size: int, bos_id: int, eos_id: int):
        self.stepper = stepper
        self.vocab_size, self.bos_id, self.eos_id = vocab_size, bos_id, eos_id
        self._running: list[_Sentence] = []  # in the stepper's order

    def __len__(self) -> int:
        return len(self._running)

    @property
    def keys(self) -> list[Hashable]:
        return [s.key for s in self._running]

    @property
    def age(self) -> int:
        """Steps taken by the oldest running sentence: the cache columns every hypothesis of the set carries."""
        return max((s.position for s in self._running), default=0)

    def admit(self, entries: Iterable[tuple[Hashable, list[int], SearchOptions]]) -> None:
        """Add sentences (key, source ids without EOS, options); they take their first step with the next."""
        entries = list(entries)
        for _, _, options in entries:
            options.check()
        if not entries:
            return
        self.stepper.admit([list(ids) for _, ids, _ in entries])
        for key, ids, options in entries:
            self._running.append(_Sentence(key, len(ids), options, [_start(options.no_repeat_ngram > 0)]))

    def drop(self, keys: Iterable[Hashable]) -> list[Hashable]:
        """Remove these sentences from the set (e.g. their client left); returns the keys found."""
        gone = set(keys)
        kept = [b for b, s in enumerate(self._running) if s.key not in gone]
        dropped = [s.key for s in self._running if s.key in gone]
        if dropped:
            self._keep(kept)
        return dropped

    def step(self) -> list[tuple[Hashable, list[Finished]]]:
        """One decoder step for every running sentence; returns the sentences done after it, with their
        ``n_best`` best finished hypotheses, best first."""
        running = self._running
        if not running:
            return []
        hyps = max(len(s.alive) for s in running)
        bos = self.bos_id
        token_rows: list[int] = []
        score_rows: list[float] = []
        reorder_list: list[int] = []
        for s in running:
            alive = s.alive
            fresh = not s.position  # a new sentence's start is fed BOS
            for h in alive:
                token, score, row = _FED(h)
                token_rows.append(bos if fresh else token)
                score_rows.append(score)
                reorder_list.append(row)
            pad = hyps - len(alive)
            if pad:  # padding rows repeat the sentence's last hypothesis, scored -inf
                token_rows += [bos] * pad
                score_rows += [-np.inf] * pad
                reorder_list += [alive[-1][_ROW]] * pad
        banned: list[list[AbstractSet[int]] | None] = []  # per sentence, None when it bans nothing this step
        extra = 0
        for s in running:
            n = s.options.no_repeat_ngram
            sets: list[AbstractSet[int]] | None = None
            if n:
                # Most hypotheses hold their tail's first token once and ban nothing: told without a call, in a
                # plain loop (a set of 128 sentences has 512 hypotheses a step; bench search-cost with the guard).
                m = n - 1
                for i, t in enumerate(map(_TOKENS_OF, s.alive)):
                    if m and (len(t) < m or t.count(t[-m]) == 1):
                        continue
                    found = banned_tokens(t, n)
                    if found:
                        if sets is None:
                            sets = [_NOTHING for _ in s.alive]
                        sets[i] = found
                        extra = max(extra, len(found))
            banned.append(sets)
        widest = max(s.options.beam_size for s in running)
        k = min(2 * widest + extra, self.vocab_size)
        batch = len(running)
        positions = np.array([s.position for s in running], dtype=np.int64)
        top_lp, top_ids, attention = self.stepper.step(
            np.array(token_rows, dtype=np.int64).reshape(batch, hyps),
            positions,
            np.array(reorder_list, dtype=np.int64),
            k,
            any(s.options.with_attention for s in running),
        )
        width = top_ids.shape[2]
        flat = (np.array(score_rows).reshape(batch, hyps, 1) + top_lp).reshape(batch, -1)  # float64
        # Stable sort on the negated score = the reference's sort: ties keep (hypothesis, rank) order. The walk
        # below never goes deeper than the beam plus one EOS per hypothesis (a row's top-k ids are distinct)
        # plus the banned tokens, so only that many proposals become Python values.
        depth = min(hyps * width, widest + hyps * (1 + extra))
        ranking = np.argsort(-flat, axis=1, kind="stable")[:, :depth]
        ranked = _Ranked(ranking, flat, top_ids.reshape(batch, -1), top_lp.reshape(batch, -1), attention, width, hyps)
        if batch >= ARRAYS_FROM:
            chosen = self._choose_arrays(ranked, banned)
        else:
            chosen = self._choose_walk(ranked, banned)
        still: list[int] = []
        done: list[tuple[Hashable, list[Finished]]] = []
        for b, s in enumerate(running):
            opts, grown, penalty = s.options, chosen[b], s.options.length_penalty
            beam = opts.beam_size
            s.position += 1
            if s.position >= opts.max_len:
                s.finished += [(h[_SCORE] / max(1, h[_LENGTH]) ** penalty, h) for h in grown]
                grown = []
            s.alive = grown
            finished = len(s.finished)
            if (
                grown
                and finished < beam
                and not (opts.early_stop and finished >= opts.n_best and _settled(s.finished, grown, opts))
            ):
                still.append(b)
            else:
                done.append((s.key, s.result()))
        if len(still) < len(running):
            self._keep(still)
        return done

    def _choose_walk(self, proposals: _Ranked, banned: list[list[AbstractSet[int]] | None]) -> list[list[_Hyp]]:
        """Each sentence's grown hypotheses, its finished ones appended to ``finished``: its ranked proposals
        walked in Python (module docstring)."""
        ranking, flat, top_ids, top_lp, attention, width, hyps = proposals
        rows = np.arange(len(self._running))[:, None]
        ranked, scores_l = ranking.tolist(), flat[rows, ranking].tolist()
        ids_l, lp_l = top_ids[rows, ranking].tolist(), top_lp[rows, ranking].tolist()
        eos, chosen = self.eos_id, []
        for b, s in enumerate(self._running):
            opts, parents, ban = s.options, s.alive, banned[b]
            guarded = opts.no_repeat_ngram > 0
            n_alive, beam, attend, penalty = len(parents), opts.beam_size, opts.with_attention, opts.length_penalty
            grown: list[_Hyp] = []
            for flat_index, token, lp, score in zip(ranked[b], ids_l[b], lp_l[b], scores_l[b], strict=True):
                i = flat_index // width
                if i >= n_alive:
                    break  # padding rows score -inf and sort last: the real proposals are used up
                if ban is not None and token in ban[i]:
                    continue
                parent = parents[i]
                length = parent[_LENGTH] + 1
                row = attention[b, i, : s.source_len + 1] if attend and attention is not None else None
                if token == eos:
                    hyp = (token, lp, row, parent, score, b * hyps + i, length, None)
                    s.finished.append((score / length**penalty, hyp))
                else:
                    path = parent[_TOKENS] + (token,) if guarded else None
                    grown.append((token, lp, row, parent, score, b * hyps + i, length, path))
                    if len(grown) == beam:
                        break
            chosen.append(grown)
        return chosen

    def _choose_arrays(self, proposals: _Ranked, banned: list[list[AbstractSet[int]] | None]) -> list[list[_Hyp]]:
        """What ``_choose_walk`` chooses, found with numpy over the whole set: a proposal grows its hypothesis
        when it is real (not a padding row's, which sort last, nor a token its hypothesis bans, which the walk
        skips), not EOS and among the first ``beam`` such of its sentence; an EOS finishes one when fewer than
        ``beam`` grew before it. Python then only builds the chosen hypotheses, and marks the banned proposals of
        the few sentences that ban a token this step."""
        ranking, flat, top_ids, top_lp, attention, width, hyps = proposals
        running, eos = self._running, self.eos_id
        batch = len(running)
        rows = np.arange(batch)[:, None]
        parent = ranking // width
        ids = top_ids[rows, ranking]
        alive = np.array([len(s.alive) for s in running])[:, None]
        beams = np.array([s.options.beam_size for s in running])[:, None]
        real = parent < alive
        for b, sets in enumerate(banned):
            if sets is not None:  # its hypotheses' banned tokens are proposals it never takes (EOS is never banned)
                n_alive = len(sets)
                for j, (i, token) in enumerate(zip(parent[b].tolist(), ids[b].tolist(), strict=True)):
                    if i < n_alive and token in sets[i]:
                        real[b, j] = False
        ends = ids == eos
        grows = real & ~ends
        before = np.cumsum(grows, axis=1) - grows  # hypotheses grown before each proposal
        open_ = before < beams
        chosen: list[list[_Hyp]] = [[] for _ in range(batch)]
        for mask, finishing in ((grows & open_, False), (real & ends & open_, True)):
            at_b, at_j = np.nonzero(mask)  # row-major: each sentence's in rank order
            if not len(at_b):
                continue
            picked_parent = parent[at_b, at_j].tolist()
            picked_ids = ids[at_b, at_j].tolist()
            picked_lp = top_lp[at_b, ranking[at_b, at_j]].tolist()
            picked_score = flat[at_b, ranking[at_b, at_j]].tolist()
            for b, i, token, lp, score in zip(
                at_b.tolist(), picked_parent, picked_ids, picked_lp, picked_score, strict=True
            ):
                s = running[b]
                parent_hyp = s.alive[i]
                length = parent_hyp[_LENGTH] + 1
                row = (
                    attention[b, i, : s.source_len + 1] if attention is not None and s.options.with_attention else None
                )
                if finishing:
                    hyp = (token, lp, row, parent_hyp, score, b * hyps + i, length, None)
                    s.finished.append((score / length**s.options.length_penalty, hyp))
                else:
                    path = parent_hyp[_TOKENS] + (token,) if s.options.no_repeat_ngram > 0 else None
                    chosen[b].append((token, lp, row, parent_hyp, score, b * hyps + i, length, path))
        return chosen

    def _keep(self, kept: list[int]) -> None:
        self._running = [self._running[b] for b in kept]
        self.stepper.keep(np.array(kept, dtype=np.int64))


def search(
    stepper: Stepper,
    sources: list[list[int]],
    options: SearchOptions | list[SearchOptions],
    *,
    vocab_size: int,
    bos_id: int,
    eos_id: int,
) -> list[list[Finished]]:
    """Decode ``sources`` together to the end: the ``n_best`` best finished hypotheses of each, best first."""
    per_sentence = options if isinstance(options, list) else [options] * len(sources)
    beams = BeamSearch(stepper, vocab_size=vocab_size, bos_id=bos_id, eos_id=eos_id)
    beams.admit(zip(range(len(sources)), sources, per_sentence, strict=True))
    results: dict[Hashable, list[Finished]] = {}
    while beams:
        results.update(beams.step())
    return [results[i] for i in range(len(sources))]


_NOTHING: frozenset[int] = frozenset()


def banned_tokens(tokens: Sequence[int], n: int) -> AbstractSet[int]:
    """Tokens that would complete an n-gram ``tokens`` already holds (EOS is never among ``tokens``)."""
    if n < 1 or len(tokens) < n - 1:
        return _NOTHING
    if n == 1:
        return set(tokens)
    size = len(tokens)
    tail = tokens[size - n + 1 :]
    first, start = tail[0], 0
    if tokens.count(first) == 1:  # only the tail's own: nothing to ban (most hypotheses; no exception raised)
        return _NOTHING
    banned: set[int] = set()
    while True:  # each earlier start of the tail, found by the sequence's own (C) search
        try:
            j = tokens.index(first, start, size - n + 1)
        except ValueError:
            return banned
        if tokens[j : j + n - 1] == tail:
            banned.add(tokens[j + n - 1])
        start = j + 1


def _settled(finished: list[tuple[float, _Hyp]], alive: list[_Hyp], opts: SearchOptions) -> bool:
    """The ``n_best`` best finished hypotheses beat the best score any alive one can still reach."""
    if len(finished) < opts.n_best:
        return False
    lp, max_len = opts.length_penalty, max(opts.max_len, 1)
    worst_kept = sorted((score for score, _ in finished), reverse=True)[opts.n_best - 1]
    reachable = max(max(h[_SCORE] / (h[_LENGTH] + 1) ** lp, h[_SCORE] / max_len**lp) for h in alive)
    return worst_kept > reachable
