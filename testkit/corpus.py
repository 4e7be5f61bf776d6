"""Checks shared by the corpus tests of the separate test groups (dictionary, games)."""

from __future__ import annotations

from pathlib import Path

from training.corpus.report import write_splits
from training.corpus.sources import Pair
from training.corpus.split import CorpusSplits

FIVE_TEST_GROUPS = ("bible", "libreoffice-help", "software-ui", "command-line", "manuals")


def check_group_added(
    without: CorpusSplits, added: CorpusSplits, group: str, source: str, held: list[Pair], out: Path
) -> list[Pair]:
    """``added`` is ``without`` plus a separate test group: dev and every other test set unchanged, the group's
    held-out pairs all of ``source`` and out of training with everything held out before, its test file on its own,
    and ``test.tsv`` (written to ``out``) still the five groups of before. Returns the group's held-out pairs."""
    assert added.dev == without.dev
    assert {g: ps for g, ps in added.test.items() if g != group} == {
        g: ps for g, ps in without.test.items() if g != group
    }
    heldout = added.test[group]
    assert heldout and all(p.source == source for p in heldout)
    train_en = {p.en for p in added.train}
    assert not train_en & {p.en for p in heldout} and not train_en & {p.en for p in held}
    sizes = write_splits(out, added)
    assert sizes[f"test.{group}.tsv"] == len(heldout)
    assert (out / "test.tsv").read_text(encoding="utf-8") == "".join(
        f"{p.en}\t{p.de}\n" for g in FIVE_TEST_GROUPS for p in without.test.get(g, [])
    )
    return heldout


def held_out_pairs(splits: CorpusSplits) -> list[Pair]:
    """Every pair of ``splits``' test sets, then its dev set: what a source added later must leave held out."""
    return [p for group in splits.test.values() for p in group] + splits.dev


def catalog_pairs(units: int = 100, per_unit: int = 20) -> list[Pair]:
    """A software catalog's pairs, ``per_unit`` strings to each of ``units`` catalogs: groups to hold out from."""
    return [
        Pair("gimp", f"cat{u}.mo", f"Layer {u} no. {i}", f"Ebene {u} Nr. {i}")
        for u in range(units)
        for i in range(per_unit)
    ]


def say_it_pairs(source: str = "freedict", units: int = 60, per_unit: int = 5) -> list[Pair]:
    """Short sentence pairs, ``per_unit`` to a unit: a group large enough to hold out a test set."""
    return [
        Pair(source, f"word{u}", f"Say it {u} times {i}.", f"Sag es {u} mal {i}.")
        for u in range(units)
        for i in range(per_unit)
    ]
