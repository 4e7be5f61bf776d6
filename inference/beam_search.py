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
then its ``k`` best allowed tokens.

**The graph's top-k.** The walk never reads more than ``beam + 1`` of a hypothesis' proposals: they come in its
own order (one score plus each token's log-probability), at most one of them is EOS, and ``beam`` grown end its
sentence's walk. So each step asks the graph only for ``beam + 1`` tokens plus the most any hypothesis has banned
(the allowed ones among those always include its ``beam + 1`` best), not ``2 * beam``, and the result is exactly
that of the rules on the full distribution (``tests/inference/test_beam_search_unit.py`` checks it against a
brute-force search, and a test in which a hypothesis' EOS comes first and its next ``beam`` proposals are all
needed). The same argument lets sentences with different beam sizes share one step: the graph's ``k`` is that of
the widest.

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

**Two ways to hold a set, one choice.** A small set keeps each hypothesis as a tuple linked to the one it
extends and walks each sentence's ranked proposals in Python (:meth:`BeamSearch._walk`). A large one (at least
``ARRAYS_FROM`` sentences) keeps them in arrays over ``[sentences, hyps]`` (:class:`_Arrays`: each hypothesis' tokens
so far, its score, feed and cache row) and makes the same choice for the whole set with numpy
(:meth:`BeamSearch._step_arrays`): per step a fixed number of numpy calls and Python only for the hypotheses that
finish, where the walk costs Python per hypothesis. Numpy's calls cost more than the walk for a few sentences and
less for many (the GPU's batch of 128: the search was half its step, docs/inference-core.md). A set converts when
it crosses the line; the tests run every rule in both forms and across conversions.
"""

from __future__ import annotations

import functools
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
"""A hypothesis of a small set, as a link to the one it extends (a plain tuple: a search step makes hundreds, and a
tuple is the cheapest object Python builds). Growing one costs the same at any length; its tokens are read back by
following the links (:func:`_path`) only when it is returned. ``length`` counts its tokens; the empty start
hypothesis of a sentence has no parent and length 0. ``tokens``: with an n-gram guard, its tokens as a tuple
(the guard reads them at every step, and one tuple a grown hypothesis costs less than walking the links each
time: bench search-cost); None without."""
_TOKEN, _LOGPROB, _ATTENTION, _PARENT, _SCORE, _ROW, _LENGTH, _TOKENS = range(8)
_FED = operator.itemgetter(_TOKEN, _SCORE, _ROW)
"""What a step feeds the graph of a hypothesis: its last token, its score and its cache row."""
_TOKENS_OF = operator.itemgetter(_TOKENS)
ARRAYS_FROM = 56
"""A set of at least this many sentences keeps its hypotheses in arrays (:class:`_Arrays`) and chooses among their
proposals with numpy; it goes back to linked hypotheses below three quarters as many (a set that shrinks past the
line converts once; one that hovers at it does not convert every step). Small sets walk their proposals in Python,
which costs less than numpy's calls there; both choose the same (``python -m bench search-cost --a . --b .
--a-arrays-from 1000000000 --b-arrays-from 1``: the two forms cost the same at 48-52 sentences on the CPU it ran
on, within its noise from 44 to 56: docs/inference-core.md, session 49)."""
GUARDED_ARRAYS_FROM = 40
"""ARRAYS_FROM for a set in which any sentence guards n-grams (the server's default): the walk's guard is Python per
hypothesis, the arrays' a few numpy calls for the whole set, and the two forms cost the same at 36-40 sentences
there (the same bench with ``--no-repeat-ngram 3 --pieces 400``)."""


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
    tokens.reverse()
    lps.reverse()
    rows.reverse()
    before = hyp[_ATTENTION]  # the root: a sentence's empty start, or what a hypothesis held as its set left arrays
    if before is None:
        return tokens, lps, rows
    first, first_lps, first_rows = before.path()
    return first + tokens, first_lps + lps, first_rows + rows


def _linked(hist: np.ndarray, rows: list[np.ndarray], score: float, row: int, guarded: bool) -> _Hyp:
    """A hypothesis of a set leaving its arrays, whose tokens and log-probabilities are ``hist`` ((tokens, 2), a row
    of :attr:`_Arrays.hist` no step writes again): one link for its last token, on a root that holds the ones
    before as they are (read back by :func:`_path` only if the hypothesis is returned). Linking every token
    instead cost 5.3 ms a conversion of a set of 128 sentences under cProfile, this 1.0 (docs/inference-core.md,
    session 48)."""
    length = len(hist)
    if not length:
        return _start(guarded)
    root = (-1, 0.0, _Ended(hist[:-1], None, rows[:-1]), None, 0.0, 0, length - 1, None)
    token, lp = int(hist[-1, 0]), float(hist[-1:, 1].view(np.float32)[0])
    tokens = tuple(hist[:, 0].tolist()) if guarded else None
    return (token, lp, rows[-1] if rows else None, root, score, row, length, tokens)


class _Ended(NamedTuple):
    """A hypothesis finished while its set kept arrays: its columns of :attr:`_Arrays.hist`, then EOS (if it
    ended with one) and that token's log-probability."""

    hist: np.ndarray
    eos: tuple[int, float] | None
    rows: list[np.ndarray]

    def path(self) -> tuple[list[int], list[float], list[np.ndarray]]:
        tokens, lps = self.hist[:, 0].tolist(), self.hist[:, 1].view(np.float32).tolist()
        if self.eos is not None:
            tokens.append(self.eos[0])
            lps.append(self.eos[1])
        return tokens, lps, self.rows


_NO_KEYS = np.zeros(0, np.int64)
"""No banned proposals (BeamSearch._banned)."""

_ended = functools.partial(tuple.__new__, _Ended)
"""_Ended from a tuple of its fields, without NamedTuple's keyword handling (many a step)."""

_Rows = tuple
"""A hypothesis' attention rows while its set keeps arrays: (last row, _Rows of the ones before), () for none."""


def _unlink(rows: _Rows) -> list[np.ndarray]:
    out = []
    while rows:
        out.append(rows[0])
        rows = rows[1]
    return out[::-1]


@dataclass
class _Sentence:
    key: Hashable
    source_len: int
    options: SearchOptions
    alive: list[_Hyp]
    """Its alive hypotheses while its set walks (no arrays)."""
    finished: list[tuple[float, _Hyp | _Ended]] = field(default_factory=list)
    """(score / len ** length_penalty, hypothesis) of every finished one, in the order they finished."""
    position: int = 0
    """Tokens generated so far, while its set walks."""
    rows: list[_Rows] | None = None
    """With attention, while its set keeps arrays: each alive hypothesis' attention rows."""

    def result(self) -> list[Finished]:
        best = sorted(self.finished, key=lambda f: -f[0])[: self.options.n_best]  # stable: ties keep that order
        results = []
        for score, hyp in best:
            tokens, lps, rows = hyp.path() if isinstance(hyp, _Ended) else _path(hyp)
            results.append(Finished(tokens, score, lps, rows))
        return results


HIST_COLUMNS = 16
"""The fewest token columns :attr:`_Arrays.hist` holds; it doubles when a hypothesis needs more and halves when its
longest running one uses a quarter."""
BEAM, N_BEST, MAX_LEN, NGRAM, POSITION, ALIVE, FINISHED, ATTEND = range(8)
"""Columns of :attr:`_Arrays.ints`."""
PENALTY, KTH, EARLY, LONGEST = range(4)
"""Columns of :attr:`_Arrays.floats`."""


@dataclass
class _Arrays:
    """A large set's hypotheses as arrays over ``[sentences, hyps]``: each sentence's alive hypotheses in the
    first ``ALIVE`` slots of its row, the rest padding (a copy of its last one's feed, scored -inf). Every
    hypothesis of a sentence has generated ``POSITION`` tokens. Few arrays, so that keeping and admitting
    sentences costs few numpy calls."""

    ints: np.ndarray
    """(sentences, 8) int64: beam, n_best, max_len (at least 1), n-gram guard, position, alive, finished,
    attention asked (1 or 0)"""
    floats: np.ndarray
    """(sentences, 4) float64: length penalty; the ``n_best``-th best finished score (-inf while fewer);
    early_stop (1.0 or 0.0); max_len ** length penalty"""
    last: np.ndarray
    """(sentences, hyps) int64 each hypothesis' last token (BOS before its first step, and on padding)"""
    row: np.ndarray
    """(sentences, hyps) int64 the row of the previous step's cache each hypothesis extends"""
    score: np.ndarray
    """(sentences, hyps) float64 sum of log-probabilities; -inf on padding"""
    hist: np.ndarray
    """(sentences, hyps, columns, 2) int32 each hypothesis' tokens and their log-probabilities' float32 bits
    (one array: one gather a step); the columns double and halve (HIST_COLUMNS)"""

    @classmethod
    def of(cls, sentences: list[_Sentence], bos: int) -> _Arrays:
        """The arrays of a walking set's sentences (each hypothesis' links read once)."""
        hyps = max(len(s.alive) for s in sentences)
        columns = max(HIST_COLUMNS, 2 * max(s.position for s in sentences))
        batch = len(sentences)
        ints, floats = _settings(sentences)
        last = np.full((batch, hyps), bos, np.int64)
        row = np.zeros((batch, hyps), np.int64)
        score = np.full((batch, hyps), -np.inf)
        hist = np.zeros((batch, hyps, columns, 2), np.int32)
        lps = hist[..., 1].view(np.float32)
        for b, s in enumerate(sentences):
            s.rows = [] if s.options.with_attention else None
            for i in range(hyps):
                h = s.alive[min(i, len(s.alive) - 1)]
                row[b, i] = h[_ROW]
                if i >= len(s.alive):
                    continue
                tokens, lp, rows = _path(h)
                hist[b, i, : len(tokens), 0] = tokens
                lps[b, i, : len(tokens)] = lp
                if s.position:
                    last[b, i] = h[_TOKEN]
                score[b, i] = h[_SCORE]
                if s.rows is not None:
                    linked: _Rows = ()
                    for r in rows:
                        linked = (r, linked)
                    s.rows.append(linked)
            s.alive = []
        return cls(ints, floats, last, row, score, hist)

    def hypotheses(self, sentences: list[_Sentence]) -> None:
        """Give the sentences back their alive hypotheses as links (the set walks again)."""
        ints, hist, scores, cache_rows = self.ints, self.hist, self.score.tolist(), self.row.tolist()
        for b, s in enumerate(sentences):
            position, guarded = int(ints[b, POSITION]), s.options.no_repeat_ngram > 0
            s.position, s.alive = position, []
            for i in range(int(ints[b, ALIVE])):
                rows = _unlink(s.rows[i]) if s.rows is not None else []
                s.alive.append(_linked(hist[b, i, :position], rows, scores[b][i], cache_rows[b][i], guarded))
            s.rows = None


class _Grown(NamedTuple):
    """A step's grown hypotheses, (sentences, slots) each but ``grown``: each sentence's first ``grown`` slots hold
    them in rank order, the rest repeat its last one (scored -inf)."""

    grown: np.ndarray
    """(sentences,) how many grew"""
    from_slot: np.ndarray
    """the slot of the hypothesis each extends"""
    token: np.ndarray
    lp: np.ndarray
    """the token's log-probability (float32)"""
    score: np.ndarray
    """its new score (float64)"""


def _settings(sentences: list[_Sentence]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of :attr:`_Arrays.ints` and :attr:`_Arrays.floats` of sentences."""
    ints, floats = [], []
    for s in sentences:
        o = s.options
        ints.append(
            (
                o.beam_size,
                o.n_best,
                max(o.max_len, 1),
                o.no_repeat_ngram,
                s.position,
                len(s.alive),
                len(s.finished),
                o.with_attention,
            )
        )
        floats.append((o.length_penalty, _kth(s), o.early_stop, max(o.max_len, 1) ** o.length_penalty))
    return np.array(ints, np.int64).reshape(-1, 8), np.array(floats, np.float64).reshape(-1, 4)


def _kth(s: _Sentence) -> float:
    """The ``n_best``-th best finished score of a sentence, -inf while it has fewer."""
    n_best = s.options.n_best
    if len(s.finished) < n_best:
        return -np.inf
    return sorted((f[0] for f in s.finished), reverse=True)[n_best - 1]


class BeamSearch:
    """A running set of sentences: admit between steps, one :meth:`step` for all, results as they finish."""

    def __init__(self, stepper: Stepper, *, vocab_size: int, bos_id: int, eos_id: int):
        self.stepper = stepper
        self.vocab_size, self.bos_id, self.eos_id = vocab_size, bos_id, eos_id
        self._running: list[_Sentence] = []  # in the stepper's order
        self._arrays: _Arrays | None = None
        """The set's hypotheses while it is large (ARRAYS_FROM); None while it walks linked ones."""
        self._traits: tuple[int, bool, bool] | None = None
        """The running sentences' widest beam, whether any asks for attention rows and whether any guards
        n-grams; None when the set changed since (:meth:`_set_traits`)."""

    def __len__(self) -> int:
        return len(self._running)

    @property
    def keys(self) -> list[Hashable]:
        return [s.key for s in self._running]

    @property
    def age(self) -> int:
        """Steps taken by the oldest running sentence: the cache columns every hypothesis of the set carries."""
        if self._arrays is not None:
            return int(self._arrays.ints[:, POSITION].max())
        return max((s.position for s in self._running), default=0)

    def admit(self, entries: Iterable[tuple[Hashable, list[int], SearchOptions]]) -> None:
        """Add sentences (key, source ids without EOS, options); they take their first step with the next."""
        entries = list(entries)
        for _, _, options in entries:
            options.check()
        if not entries:
            return
        self.stepper.admit([list(ids) for _, ids, _ in entries])
        new = [
            _Sentence(key, len(ids), options, [_start(options.no_repeat_ngram > 0)]) for key, ids, options in entries
        ]
        self._running += new
        self._traits = None
        a = self._arrays
        if a is not None:  # the new sentences' rows: their start hypothesis in slot 0, padding after it
            hyps, columns = a.score.shape[1], a.hist.shape[2]
            n = len(new)
            ints, floats = _settings(new)
            last = np.full((n, hyps), self.bos_id, np.int64)
            score = np.full((n, hyps), -np.inf)
            score[:, 0] = 0.0
            a.ints = np.concatenate([a.ints, ints])
            a.floats = np.concatenate([a.floats, floats])
            for s in new:
                s.alive, s.rows = [], [()] if s.options.with_attention else None
            a.last = np.concatenate([a.last, last])
            a.row = np.concatenate([a.row, np.zeros((n, hyps), np.int64)])
            a.score = np.concatenate([a.score, score])
            a.hist = np.concatenate([a.hist, np.zeros((n, hyps, columns, 2), np.int32)])

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
        a = self._arrays
        if a is None:  # the walk reads the set's traits anyway; arrays hold the guard in a column
            line = GUARDED_ARRAYS_FROM if (self._traits or self._set_traits())[2] else ARRAYS_FROM
            if len(running) >= line:
                self._arrays = _Arrays.of(running, self.bos_id)
        elif (
            len(running) < max(ARRAYS_FROM, GUARDED_ARRAYS_FROM) * 3 // 4  # (a large set skips the column's read)
            and len(running) < (GUARDED_ARRAYS_FROM if a.ints[:, NGRAM].any() else ARRAYS_FROM) * 3 // 4
        ):
            a.hypotheses(running)
            self._arrays = None
        return self._walk() if self._arrays is None else self._step_arrays(self._arrays)

    def _walk(self) -> list[tuple[Hashable, list[Finished]]]:
        """A step of a small set: its proposals walked in Python, hypotheses grown as links (module docstring)."""
        running = self._running
        hyps = max(len(s.alive) for s in running)
        bos = self.bos_id
        feeds: list[tuple[int, float, int]] = []  # (token, score, cache row) of each row of the step
        for s in running:
            alive = s.alive
            if s.position:
                feeds += map(_FED, alive)
            else:  # a new sentence's start is fed BOS
                feeds += [(bos, h[_SCORE], h[_ROW]) for h in alive]
            pad = hyps - len(alive)
            if pad:  # padding rows repeat the sentence's last hypothesis, scored -inf
                feeds += [(bos, -np.inf, alive[-1][_ROW])] * pad
        token_rows, score_rows, reorder_list = zip(*feeds, strict=True)
        widest, attend_any, guarded_any = self._traits or self._set_traits()
        banned: list[list[AbstractSet[int]] | None] = [None] * len(running)  # per sentence, None: it bans nothing
        extra = 0
        for b, s in enumerate(running if guarded_any else ()):
            n = s.options.no_repeat_ngram
            sets: list[AbstractSet[int]] | None = None
            if n:
                # Most hypotheses hold their tail's first token once and ban nothing: told without a call.
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
            banned[b] = sets
        k = min(widest + 1 + extra, self.vocab_size)  # what the walk can read (module docstring)
        batch = len(running)
        positions = np.array([s.position for s in running], dtype=np.int64)
        top_lp, top_ids, attention = self.stepper.step(
            np.array(token_rows, dtype=np.int64).reshape(batch, hyps),
            positions,
            np.array(reorder_list, dtype=np.int64),
            k,
            attend_any,
        )
        width = top_ids.shape[2]
        flat = (np.array(score_rows).reshape(batch, hyps, 1) + top_lp).reshape(batch, -1)  # float64
        # Stable sort on the negated score = the reference's sort: ties keep (hypothesis, rank) order. The walk
        # below never goes deeper than the beam plus one EOS per hypothesis (a row's top-k ids are distinct)
        # plus the banned tokens, so only that many proposals become Python values.
        depth = min(hyps * width, widest + hyps * (1 + extra))
        ranking = np.argsort(-flat, axis=1, kind="stable")[:, :depth]
        # each proposal's index into the step's whole (batch, hyps, width) outputs, read with one take apiece
        where = ranking if batch == 1 else ranking + np.arange(0, batch * hyps * width, hyps * width)[:, None]
        ranked, scores_l = ranking.tolist(), flat.take(where).tolist()
        ids_l, lp_l = top_ids.take(where).tolist(), top_lp.take(where).tolist()
        eos = self.eos_id
        still: list[int] = []
        done: list[tuple[Hashable, list[Finished]]] = []
        for b, s in enumerate(running):
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

    def _step_arrays(self, a: _Arrays) -> list[tuple[Hashable, list[Finished]]]:
        """A step of a large set: the same rules, with numpy over the whole set (class _Arrays)."""
        running, ints, floats = self._running, a.ints, a.floats
        batch, hyps = a.score.shape
        beam, alive, position = ints[:, BEAM], ints[:, ALIVE], ints[:, POSITION]
        banned, extra = self._banned(a) if ints[:, NGRAM].any() else (_NO_KEYS, 0)
        widest = int(beam.max())
        k = min(widest + 1 + extra, self.vocab_size)  # what the walk can read (module docstring)
        attend = bool(ints[:, ATTEND].any())
        top_lp, top_ids, attention = self.stepper.step(a.last, position.copy(), a.row.reshape(-1), k, attend)
        attention = attention if attend else None
        width = top_ids.shape[2]
        flat = (a.score[:, :, None] + top_lp).reshape(-1)  # float64
        depth = min(hyps * width, widest + hyps * (1 + extra))  # as the walk: no deeper is ever read
        ranking = np.argsort(-flat.reshape(batch, -1), axis=1, kind="stable")[:, :depth]
        parent = ranking // width
        ranking += (np.arange(batch) * (hyps * width))[:, None]  # from here into the whole step's proposals
        ids = top_ids.take(ranking)  # take reads the outputs as flat, a view of the graph's buffer or not
        # A proposal grows its hypothesis when it is real (not a padding row's, which sort last, nor a token its
        # hypothesis bans), not EOS and among the first `beam` such of its sentence; an EOS finishes one when
        # fewer than `beam` grew before it: what the walk does.
        real = parent < alive[:, None]
        if len(banned):  # a banned token is a proposal the walk skips (never EOS)
            keys = ((np.arange(batch) * hyps)[:, None] + parent) * self.vocab_size + ids
            # banned is sorted (np.unique): one binary search a proposal, ~4x less than np.isin at 128 sentences
            real &= banned.take(np.searchsorted(banned, keys), mode="clip") != keys
        ends = ids == self.eos_id
        grows = real & ~ends
        grown_to = np.cumsum(grows, axis=1)
        open_ = grown_to - grows < beam[:, None]  # fewer than beam grown before each proposal
        grows &= open_
        finishing = real & ends & open_
        lp_flat = top_lp  # read with take only: flat indices, no copy of a view
        if finishing.any():
            self._finish_eos(a, finishing, ranking, parent, flat, lp_flat, attention)
        # The grown hypotheses, in each sentence's first slots in rank order; the rest of its row (padding)
        # repeats its last one. The state is built after the sentences that are done have left (one gather).
        grown = np.minimum(grown_to[:, -1], beam)
        chosen = np.flatnonzero(grows)  # into (sentences, depth), row-major: each sentence's in rank order
        slots = max(int(grown.max()), 1)
        slot = np.arange(slots)[None, :]
        first = np.cumsum(grown) - grown  # each sentence's first grown hypothesis in chosen
        pick = np.minimum(first[:, None] + np.minimum(slot, np.maximum(grown - 1, 0)[:, None]), len(chosen) - 1)
        pick = chosen.take(pick) if len(chosen) else np.zeros_like(pick)  # (sentences, slots) into (sentences, depth)
        proposal = ranking.take(pick)
        from_slot = parent.take(pick)  # the slot each new hypothesis extends
        token = ids.take(pick)
        new_lp = lp_flat.take(proposal)
        filled = slot < grown[:, None]
        score = np.where(filled, flat.take(proposal), -np.inf)
        length = position + 1  # every grown hypothesis' tokens
        new = _Grown(grown, from_slot, token, new_lp, score)
        at_max = (length >= ints[:, MAX_LEN]) & (grown > 0)
        if at_max.any():  # hypotheses reaching max_len are finished as they are
            self._finish_at_max(a, np.flatnonzero(at_max), new, attention)
            grown = np.where(at_max, 0, grown)
        # Done: beam finished hypotheses, none alive, or (early_stop) its n_best best finished beat the best any
        # alive one can still reach: the larger of its score over length + 1 and over max_len (log-probabilities
        # are at most 0), for its best alive one, which is in slot 0 (the slots are in rank order).
        best = score[:, 0]
        reach = np.maximum(best / (length + 1.0) ** floats[:, PENALTY], best / floats[:, LONGEST])
        finished = ints[:, FINISHED]
        settled = (floats[:, EARLY] > 0) & (finished >= ints[:, N_BEST]) & (floats[:, KTH] > reach)
        go_on = (grown > 0) & (finished < beam) & ~settled
        everyone = bool(go_on.all())
        done = [] if everyone else [(running[b].key, running[b].result()) for b in np.flatnonzero(~go_on).tolist()]
        kept = np.flatnonzero(go_on)
        if len(kept):
            self._advance(a, kept, _Grown(grown[kept], *(x[kept] for x in new[1:])), attention)
        else:
            self._arrays = None
        if not everyone:
            self._running = [running[b] for b in kept.tolist()]
            self._traits = None
            self.stepper.keep(kept)
        return done

    def _advance(self, a: _Arrays, kept: np.ndarray, new: _Grown, attention: np.ndarray | None) -> None:
        """The kept sentences' next state, from their rows of ``new``."""
        hyps = a.score.shape[1]
        grown = new.grown
        slots = int(grown.max())
        from_slot, token, new_lp, score = (x[:, :slots] for x in new[1:])
        row = kept[:, None] * hyps + from_slot
        column = a.ints[kept, POSITION][:, None]
        columns, written = a.hist.shape[2], int(column.max()) + 1  # written: the most tokens after this step
        if columns > HIST_COLUMNS and written * 4 <= columns:  # the long sentences have left: half the columns
            hist = a.hist[kept[:, None], from_slot, : columns // 2]
        else:
            hist = a.hist.reshape(-1, columns, 2).take(row, axis=0)
        if written > hist.shape[2]:  # room for one more token a hypothesis
            hist = np.concatenate([hist, np.zeros_like(hist)], axis=2)
        slot = np.arange(slots)[None, :]
        cell = ((np.arange(len(kept))[:, None] * slots + slot) * hist.shape[2] + column).reshape(-1)
        pairs = hist.reshape(-1, 2)  # a view: (hypothesis, column) -> token, log-probability bits
        pairs[cell, 0], pairs[cell, 1] = token.reshape(-1), new_lp.reshape(-1).view(np.int32)
        a.hist = hist
        a.last = np.where(slot < grown[:, None], token, self.bos_id)
        a.score = score
        a.row = row
        a.ints, a.floats = a.ints[kept], a.floats[kept]
        a.ints[:, POSITION] += 1
        a.ints[:, ALIVE] = grown
        if attention is not None:
            for r in np.flatnonzero(a.ints[:, ATTEND]).tolist():
                b = int(kept[r])
                s = self._running[b]
                assert s.rows is not None
                s.rows = [(attention[b, i, : s.source_len + 1], s.rows[i]) for i in from_slot[r, : grown[r]].tolist()]

    def _banned(self, a: _Arrays) -> tuple[np.ndarray, int]:
        """What alive hypotheses may not take this step (no_repeat_ngram), as keys ``(sentence * hyps + slot) *
        vocab + token``, and the most any one bans: :func:`banned_tokens` with arrays over the whole set."""
        n, position, alive = a.ints[:, NGRAM], a.ints[:, POSITION], a.ints[:, ALIVE]
        used = int(position.max())  # columns written
        tokens = np.ascontiguousarray(a.hist[:, :, :used, 0])
        batch, hyps = a.score.shape
        sentences = np.arange(batch)
        keys = []
        for size in sorted(set(n.tolist()) - {0}):  # n-grams of `size`: an earlier start of the tail bans what followed
            tail = size - 1
            if used <= tail:
                continue
            starts = used - tail
            at = position - tail  # where each hypothesis' own tail starts: an n-gram it holds starts before
            if tail:
                # (sentence, slot, start) whose tail-long run of tokens equals the hypothesis' own tail, for every
                # row; then only the few hits are checked (the sentence guards n-grams of this size, the slot is
                # alive, the start comes before the tail's own). A flat index and two divisions cost a sixth of a
                # three-axis np.nonzero here (docs/inference-core.md, session 48).
                own = np.maximum(at, 0)
                match = tokens[:, :, :starts] == tokens[sentences, :, own][:, :, None]
                for q in range(1, tail):
                    match &= tokens[:, :, q : q + starts] == tokens[sentences, :, own + q][:, :, None]
                b, rest = np.divmod(np.flatnonzero(match), hyps * starts)
                i, start = np.divmod(rest, starts)
                kept = (start < at[b]) & (i < alive[b]) & (n[b] == size)
                b, i, start = b[kept], i[kept], start[kept]
            else:  # n = 1: every token the hypothesis holds
                valid = (
                    (np.arange(starts)[None, None, :] < position[:, None, None])
                    & (np.arange(hyps)[None, :, None] < alive[:, None, None])
                    & (n == size)[:, None, None]
                )
                b, i, start = np.nonzero(valid)
            keys.append((b * hyps + i) * self.vocab_size + tokens[b, i, start + tail])
        banned = np.unique(np.concatenate(keys)) if keys else _NO_KEYS
        if not len(banned):
            return banned, 0
        return banned, int(np.unique(banned // self.vocab_size, return_counts=True)[1].max())

    def _finish_eos(
        self,
        a: _Arrays,
        finishing: np.ndarray,
        ranking: np.ndarray,
        parent: np.ndarray,
        flat: np.ndarray,
        lp_flat: np.ndarray,
        attention: np.ndarray | None,
    ) -> None:
        """Finish the hypotheses that an EOS proposal ends."""
        at = np.flatnonzero(finishing)  # into (sentences, depth), row-major
        at_b, picked, parents = at // finishing.shape[1], ranking.take(at), parent.take(at)
        hist = a.hist.reshape(-1, *a.hist.shape[2:]).take(at_b * a.score.shape[1] + parents, axis=0)  # own copies
        eos, running = self.eos_id, self._running
        scores: list[float] = []
        for p, (b, i, length, lp, score) in enumerate(
            zip(
                at_b.tolist(),
                parents.tolist(),
                a.ints[:, POSITION].take(at_b).tolist(),
                lp_flat.take(picked).tolist(),
                flat.take(picked).tolist(),
                strict=True,
            )
        ):
            s = running[b]
            rows: list[np.ndarray] = []
            if s.rows is not None and attention is not None:
                rows = _unlink(s.rows[i]) + [attention[b, i, : s.source_len + 1]]
            normed = score / (length + 1) ** s.options.length_penalty
            s.finished.append((normed, _ended((hist[p, :length], (eos, lp), rows))))
            scores.append(normed)
        self._count_finished(a, at_b, np.array(scores))

    def _finish_at_max(self, a: _Arrays, sentences: np.ndarray, new: _Grown, attention: np.ndarray | None) -> None:
        """Finish these sentences' grown hypotheses (``new``) as they are (max_len)."""
        at_b, scores = [], []
        for b in sentences.tolist():
            s, length = self._running[b], int(a.ints[b, POSITION])
            for j in range(int(new.grown[b])):
                i = int(new.from_slot[b, j])
                rows = []
                if s.rows is not None and attention is not None:
                    rows = _unlink(s.rows[i]) + [attention[b, i, : s.source_len + 1]]
                hist = np.empty((length + 1, 2), np.int32)
                hist[:length] = a.hist[b, i, :length]
                hist[length] = new.token[b, j], new.lp[b, j : j + 1].view(np.int32)[0]
                normed = float(new.score[b, j]) / max(1, length + 1) ** s.options.length_penalty
                s.finished.append((normed, _Ended(hist, None, rows)))
                at_b.append(b)
                scores.append(normed)
        self._count_finished(a, np.array(at_b, np.int64), np.array(scores))

    def _count_finished(self, a: _Arrays, at_b: np.ndarray, scores: np.ndarray) -> None:
        """Sentences ``at_b`` have these finished scores appended (one entry a hypothesis): their counts and their
        ``n_best``-th best scores."""
        a.ints[:, FINISHED] += np.bincount(at_b, minlength=len(a.ints))
        one = a.ints[at_b, N_BEST] == 1
        np.maximum.at(a.floats[:, KTH], at_b[one], scores[one])
        more = at_b[~one]
        if not len(more):
            return
        for b in np.unique(more[a.ints[more, FINISHED] >= a.ints[more, N_BEST]]).tolist():
            a.floats[b, KTH] = _kth(self._running[b])

    def _set_traits(self) -> tuple[int, bool, bool]:
        options = [s.options for s in self._running]
        self._traits = (
            max(o.beam_size for o in options),
            any(o.with_attention for o in options),
            any(o.no_repeat_ngram for o in options),
        )
        return self._traits

    def _keep(self, kept: list[int]) -> None:
        self._running = [self._running[b] for b in kept]
        self._traits = None
        index = np.array(kept, dtype=np.int64)
        a = self._arrays
        if a is not None and not kept:
            self._arrays = None
        elif a is not None:
            a.ints, a.floats = a.ints[index], a.floats[index]
            hyps = max(int(a.ints[:, ALIVE].max()), 1)
            a.last, a.row, a.score = a.last[index, :hyps], a.row[index, :hyps], a.score[index, :hyps]
            a.hist = a.hist[index, :hyps]
        self.stepper.keep(index)


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
