"""Splitting: reserved evaluation sets, dev and test held out by whole units per group, train without
anything held out."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from training.corpus.aligners import ACTS_UNIT
from training.corpus.clean import clean_pair, english_key
from training.corpus.sources import (
    GROUP_BIBLE,
    GROUP_CLI,
    GROUP_DEBIAN_DOCS,
    GROUP_DICT,
    GROUP_DOCS,
    GROUP_EVAL,
    GROUP_GAMES,
    GROUP_HELP,
    GROUP_KDE,
    GROUP_PHRASES,
    GROUP_UI,
    SOURCES,
    Pair,
)

# Held-out pairs per test group, for dev and for test each (before de-duplication).
HELDOUT_TARGETS: dict[str, int] = {
    GROUP_BIBLE: 650,
    GROUP_HELP: 700,
    GROUP_UI: 900,
    GROUP_CLI: 700,
    GROUP_DOCS: 700,
    GROUP_DICT: 700,
    GROUP_GAMES: 700,
}
# Groups that give no dev pairs: dev stays comparable with runs made before the group existed.
TEST_ONLY_GROUPS = frozenset({GROUP_CLI, GROUP_DOCS, GROUP_DICT, GROUP_GAMES})
MAX_SPLIT_SHARE = 0.1  # never hold out more than this share of a group, per split
MAX_UNIT_SHARE = 0.3  # a held-out unit may fill at most this share of the target
# A held-out English string found in this many training units stays in training instead.
COMMON_MIN_UNITS = 3
TEST_GROUPS = (GROUP_BIBLE, GROUP_HELP, GROUP_UI, GROUP_CLI, GROUP_DOCS, GROUP_DICT, GROUP_GAMES)
# Test groups written to test.<group>.tsv only, not into test.tsv, so that test.tsv (which benches read) stays
# the same file when their source is added.
SEPARATE_TEST_GROUPS = frozenset({GROUP_DICT, GROUP_GAMES})
# The everyday-language groups: their training pairs are also written to train.<group>.tsv, so that a run can
# weight them up (``data.extra``), since they are a small share of the corpus.
GROUP_TRAIN_FILES = SEPARATE_TEST_GROUPS | {GROUP_PHRASES}
# Opt-in sources that only ever add training pairs: they never hold out, and they do not count towards
# COMMON_MIN_UNITS, so that adding them leaves dev and test exactly as they were (scores stay comparable).
TRAINING_ONLY_GROUPS = frozenset({GROUP_DEBIAN_DOCS, GROUP_KDE, GROUP_PHRASES})
# Training-only groups that add only what is new: a pair goes when its English or its German (case and punctuation
# aside) is already in training from another group or held out. Ding shares its origin with FreeDict, whose
# examples the dictionary's test set holds: one sentence there may differ from FreeDict's in its English alone.
NEW_ONLY_GROUPS = frozenset({GROUP_PHRASES})
# Groups whose units do not count towards COMMON_MIN_UNITS either: adding them moves no held-out string of the
# other groups into training.
UNCOUNTED_GROUPS = TRAINING_ONLY_GROUPS | {GROUP_DICT, GROUP_GAMES}


UnitId = tuple[str, str]  # (source, unit)


@dataclass
class CorpusSplits:
    """The assembled corpus and its bookkeeping."""

    train: list[Pair] = field(default_factory=list)
    dev: list[Pair] = field(default_factory=list)
    test: dict[str, list[Pair]] = field(default_factory=dict)
    eval: dict[str, list[Pair]] = field(default_factory=dict)
    stats: dict[str, Counter[str]] = field(default_factory=dict)
    heldout_units: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def count(self, source: str, key: str, n: int = 1) -> None:
        self.stats.setdefault(source, Counter())[key] += n


def eval_set_of(pair: Pair) -> str | None:
    """Name of the reserved evaluation set a pair belongs to, if any."""
    spec = SOURCES.get(pair.source)
    if spec is not None and spec.group == GROUP_EVAL:
        return pair.source
    if pair.source == "bible" and pair.unit == ACTS_UNIT:
        return "bible-acts"
    return None


def group_of(pair: Pair) -> str:
    spec = SOURCES.get(pair.source)
    return spec.group if spec is not None else GROUP_UI


def choose_heldout_units(sizes: dict[UnitId, int], target: int, rng: random.Random) -> list[UnitId]:
    """Pick random whole units adding up to about ``target`` pairs.

    The budget is capped at MAX_SPLIT_SHARE of the group and units larger than
    MAX_UNIT_SHARE of the budget are never held out, so several units are chosen.
    """
    budget = min(target, int(sum(sizes.values()) * MAX_SPLIT_SHARE))
    cap = max(1, int(budget * MAX_UNIT_SHARE))
    candidates = sorted(unit for unit, n in sizes.items() if 0 < n <= cap)
    rng.shuffle(candidates)
    chosen: list[UnitId] = []
    total = 0
    for unit in candidates:
        if total >= budget:
            break
        if total + sizes[unit] <= budget * 1.1:
            chosen.append(unit)
            total += sizes[unit]
    return sorted(chosen)


def unique_heldout(
    pairs: Iterable[Pair],
    taken: set[str],
    common: set[str],
    splits: CorpusSplits,
) -> list[Pair]:
    """Primary pairs whose English key is neither common nor already ``taken`` (updated)."""
    kept: list[Pair] = []
    for pair in pairs:
        key = english_key(pair.en)
        if not pair.primary:
            splits.count(pair.source, "dropped:secondary-version")
        elif key in common:
            splits.count(pair.source, "dropped:heldout-common")
        elif key in taken:
            splits.count(pair.source, "dropped:heldout-duplicate")
        else:
            taken.add(key)
            kept.append(pair)
    return kept


def clean_pairs(pairs: Iterable[Pair], splits: CorpusSplits) -> list[Pair]:
    """Clean every pair, counting extracted pairs and drops per source and reason."""
    kept: list[Pair] = []
    for pair in pairs:
        splits.count(pair.source, "extracted")
        en, de, reason = clean_pair(pair.en, pair.de)
        if reason:
            splits.count(pair.source, f"dropped:{reason}")
        else:
            kept.append(pair._replace(en=en, de=de))
    return kept


def split_off_eval(pairs: list[Pair], splits: CorpusSplits) -> tuple[list[Pair], set[str]]:
    """Move reserved-set pairs into ``splits.eval``; returns the other pairs and the English
    keys of every reserved pair (all Bible versions of Acts included)."""
    rest: list[Pair] = []
    candidates: dict[str, list[Pair]] = {}
    for pair in pairs:
        name = eval_set_of(pair)
        if name is None:
            rest.append(pair)
        else:
            candidates.setdefault(name, []).append(pair)
    for name in sorted(candidates):
        splits.eval[name] = unique_heldout(candidates[name], set(), set(), splits)
    reserved_keys = {english_key(p.en) for ps in candidates.values() for p in ps}
    return rest, reserved_keys


def choose_all_heldout_units(
    pairs: list[Pair], seed: int, targets: dict[str, int], splits: CorpusSplits
) -> tuple[set[UnitId], set[UnitId]]:
    """Test and dev units per group (sized by primary pairs), recorded in the report."""
    sizes: dict[str, Counter[UnitId]] = {}
    for pair in pairs:
        sizes.setdefault(group_of(pair), Counter())[(pair.source, pair.unit)] += pair.primary
    test_units: set[UnitId] = set()
    dev_units: set[UnitId] = set()
    splits.heldout_units = {"test": {}, "dev": {}}
    for group in sorted(sizes):
        rng = random.Random(f"{seed}:heldout:{group}")
        target = targets.get(group, 0)
        test = choose_heldout_units(dict(sizes[group]), target, rng)
        remaining = {u: n for u, n in sizes[group].items() if u not in set(test)}
        dev = [] if group in TEST_ONLY_GROUPS else choose_heldout_units(remaining, target, rng)
        test_units.update(test)
        dev_units.update(dev)
        splits.heldout_units["test"][group] = [f"{s}:{u}" for s, u in test]
        splits.heldout_units["dev"][group] = [f"{s}:{u}" for s, u in dev]
    return test_units, dev_units


def common_english_keys(pairs: Iterable[Pair], min_units: int = COMMON_MIN_UNITS) -> set[str]:
    """English keys found in at least ``min_units`` different units ("Yes", "Example:")."""
    units_per_key: dict[str, set[UnitId]] = {}
    for pair in pairs:
        units_per_key.setdefault(english_key(pair.en), set()).add((pair.source, pair.unit))
    return {key for key, units in units_per_key.items() if len(units) >= min_units}


def build_train(
    pairs: Iterable[Pair], blocked: set[str], splits: CorpusSplits, blocked_german: frozenset[str] = frozenset()
) -> list[Pair]:
    """Exact-deduplicated training pairs whose English key is not ``blocked``; pairs of NEW_ONLY_GROUPS come last
    and go when either side's key is in training already or blocked (``blocked_german`` for the German)."""
    pairs = list(pairs)
    new_only = [p for p in pairs if group_of(p) in NEW_ONLY_GROUPS]
    train: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    for pair in (p for p in pairs if group_of(p) not in NEW_ONLY_GROUPS):
        if english_key(pair.en) in blocked:
            splits.count(pair.source, "dropped:heldout-overlap")
        elif (pair.en, pair.de) in seen:
            splits.count(pair.source, "dropped:duplicate")
        else:
            seen.add((pair.en, pair.de))
            train.append(pair)
    known_english = blocked | {english_key(p.en) for p in train}
    known_german = {*blocked_german, *(english_key(p.de) for p in train)}
    for pair in new_only:
        english, german = english_key(pair.en), english_key(pair.de)
        if english in blocked or german in blocked_german:
            splits.count(pair.source, "dropped:heldout-overlap")
        elif english in known_english or german in known_german:
            splits.count(pair.source, "dropped:duplicate")
        else:
            known_english.add(english)
            known_german.add(german)
            train.append(pair)
    return train


def count_split_sizes(splits: CorpusSplits) -> None:
    """Per-source train/dev/test/eval counters for the report."""
    named: list[tuple[str, list[Pair]]] = [("train", splits.train), ("dev", splits.dev)]
    named += [("test", ps) for ps in splits.test.values()]
    named += [("eval", ps) for ps in splits.eval.values()]
    for split_name, split_pairs in named:
        for pair in split_pairs:
            splits.count(pair.source, split_name)


def assemble_corpus(
    pairs: Iterable[Pair], seed: int = 1, heldout_targets: dict[str, int] | None = None
) -> CorpusSplits:
    """Clean, split into eval/test/dev/train by whole units, dedupe and remove leaks.

    Held-out (dev/test) pairs whose English side occurs in COMMON_MIN_UNITS or more
    training units ("Yes", "Cancel", "Example:") are left to training instead, so that
    holding out a catalog does not strip the most frequent strings out of training; units of
    UNCOUNTED_GROUPS do not count. The invariant is unchanged: no English side of dev, test
    or eval occurs in train.
    """
    targets = HELDOUT_TARGETS if heldout_targets is None else heldout_targets
    splits = CorpusSplits()
    rest, reserved_keys = split_off_eval(clean_pairs(pairs, splits), splits)
    test_units, dev_units = choose_all_heldout_units(rest, seed, targets, splits)
    heldout_units = test_units | dev_units
    train_candidates = [p for p in rest if (p.source, p.unit) not in heldout_units]
    common = common_english_keys(p for p in train_candidates if group_of(p) not in UNCOUNTED_GROUPS)

    taken: set[str] = set()
    for group in TEST_GROUPS:
        in_group = [p for p in rest if (p.source, p.unit) in test_units and group_of(p) == group]
        splits.test[group] = unique_heldout(in_group, taken, common, splits)
    in_dev = (p for p in rest if (p.source, p.unit) in dev_units)
    splits.dev = unique_heldout(in_dev, taken, common, splits)

    heldout = [*splits.dev, *(p for ps in (*splits.test.values(), *splits.eval.values()) for p in ps)]
    heldout_german = frozenset(english_key(p.de) for p in heldout)
    splits.train = build_train(train_candidates, taken | reserved_keys, splits, heldout_german)
    random.Random(f"{seed}:train").shuffle(splits.train)
    count_split_sizes(splits)
    return splits
