"""bench peers' CTranslate2 vocabulary map holds, for every sentence, the very list our engine's shortlist builds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.peers import write_vmap
from core.bundle import read_manifest
from core.tokenizer import Tokenizer
from inference.shortlist import Shortlist
from testkit.synthetic import make_pairs
from training.export.shortlist import add_to_bundle


def read_vmap(path: Path) -> tuple[set[str], dict[str, set[str]]]:
    """The file as CTranslate2's VocabularyMap reads it: an empty source for the pieces always allowed."""
    always: set[str] = set()
    rules: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, targets = line.split("\t")
        assert " " not in key, "one-piece rules only"
        if key:
            rules[key] = set(targets.split(" "))
        else:
            always = set(targets.split(" "))
    return always, rules


@pytest.mark.parametrize("copy_source", [True, False])
def test_the_vmap_lists_what_the_shortlist_lists(
    tiny_bundle: Path, synthetic_corpus: tuple[Path, Path], tmp_path: Path, copy_source: bool
) -> None:
    bundle = tmp_path / "tiny"
    shutil.copytree(tiny_bundle, bundle)
    add_to_bundle(bundle, [synthetic_corpus[0]], per_piece=3, frequent=16, copy_source=copy_source)
    lines = write_vmap(bundle, tmp_path / "vmap.txt")
    always, rules = read_vmap(tmp_path / "vmap.txt")
    assert lines == len(rules) + 1
    tokenizer = Tokenizer(bundle)
    manifest = read_manifest(bundle)
    shortlist = Shortlist.load(bundle, manifest)
    specials = {tokenizer.pieces[i] for i in manifest["special_ids"].values()}
    for text, _ in make_pairs(12, seed=5, min_len=1, max_len=6):
        ids = tokenizer.encode_source(text)
        ours = {tokenizer.pieces[i] for i in shortlist.sentence(ids)}
        theirs = always.union(*(rules.get(tokenizer.pieces[i], set()) for i in ids))
        assert theirs - specials == ours - specials, text  # CTranslate2 adds UNK, BOS and EOS itself
        if copy_source:  # without it a source piece may still be listed (frequent, or a candidate)
            assert all(tokenizer.pieces[i] in theirs for i in ids)
