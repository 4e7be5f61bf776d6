"""Placeholder filling (training/literals.py): the same literal on both sides, by the placeholders' own rules."""

from __future__ import annotations

import re

import pytest

from training.config import Config, ConfigError
from training.literals import filled_copies, placeholder_copies, placeholders

PAIRS = [
    ("Could not open %s: %s", "%s konnte nicht geöffnet werden: %s"),
    ("Page %1$d of %2$s", "%2$s, Seite %1$d"),
    ("Deleted {count} files from {folder}.", "{count} Dateien aus {folder} gelöscht."),
    ("%(user)s joined %(team)s", "%(user)s ist %(team)s beigetreten"),
    ("%1 of %2 pages printed", "%1 von %2 Seiten gedruckt"),
    ("Progress: %.1f %%", "Fortschritt: %.1f %%"),  # locale-dependent rendering: left alone
    ("%s files", "%d Dateien"),  # different kinds: left alone
    ("Saved %s%s", "%s%s gespeichert"),  # run-together placeholders: left alone
    ("You logged in using %s for the first time", "Sie haben sich mit %szum ersten Mal angemeldet"),
    ("Plain text with no placeholder.", "Einfacher Text ohne Platzhalter."),
    ("Done in %d seconds", "Fertig"),  # target lacks the placeholder: left alone
]


def literals(template: str, filled: str) -> list[str]:
    """The strings that took the place of the template's placeholders, in the template's order."""
    pattern, last = "", 0
    for _, _, (start, end) in placeholders(template) or []:
        pattern += re.escape(template[last:start]) + "(.+?)"
        last = end
    return list(re.fullmatch(pattern + re.escape(template[last:]), filled).groups())  # type: ignore[union-attr]


def test_only_pairs_whose_placeholders_correspond_are_filled() -> None:
    out = filled_copies(PAIRS, copies=3, seed=1)
    sources = {src for src, _ in PAIRS[:5]}
    assert len(out) == 3 * 5
    templates = [next(s for s in sources if literals_fit(s, src)) for src, _ in out]
    assert sorted(set(templates)) == sorted(sources)


def literals_fit(template: str, filled: str) -> bool:
    try:
        literals(template, filled)
    except AttributeError:
        return False
    return True


def test_each_placeholder_gets_the_same_literal_on_both_sides() -> None:
    by_source = dict(PAIRS)
    for src, tgt in filled_copies(PAIRS, copies=20, seed=2):
        template = next(s for s in by_source if literals_fit(s, src))
        src_keys = [key for key, _, _ in placeholders(template) or []]
        tgt_keys = [key for key, _, _ in placeholders(by_source[template]) or []]
        src_values = dict(zip(src_keys, literals(template, src), strict=True))
        tgt_values = dict(zip(tgt_keys, literals(by_source[template], tgt), strict=True))
        assert src_values == tgt_values, (src, tgt)
        assert "%" not in src and "{" not in src


def test_integer_conversions_get_integers_and_copies_differ() -> None:
    out = filled_copies([("Page %1$d of %2$s", "%2$s, Seite %1$d")], copies=50, seed=3)
    pages = [literals("Page %1$d of %2$s", src)[0] for src, _ in out]
    assert all(p.isdigit() for p in pages)
    assert len({src for src, _ in out}) > 40
    kinds = {literals("Page %1$d of %2$s", src)[1] for src, _ in out}
    assert any("://" in k for k in kinds) and any("@" in k for k in kinds) and any(k.isdigit() for k in kinds)


def test_deterministic_in_the_seed() -> None:
    assert filled_copies(PAIRS, 2, seed=5) == filled_copies(PAIRS, 2, seed=5)
    assert filled_copies(PAIRS, 2, seed=5) != filled_copies(PAIRS, 2, seed=6)
    assert filled_copies(PAIRS, 0, seed=5) == []


def test_percent_signs_that_are_not_placeholders() -> None:
    assert placeholders("100 %% sure") == []
    assert placeholders("50% done") == []  # "% d" with a space flag is not taken for a placeholder
    assert placeholders("Progress %.2f") is None


PROSE = [
    ("The file is larger than 25 MB.", "Die Datei ist größer als 25 MB."),
    (
        "Open GIMP 2.10 and see https://example.org/a for details.",
        "Öffnen Sie GIMP 2.10 und siehe https://example.org/a.",
    ),
    ("It costs 20 € per year.", "Es kostet 20 € pro Jahr."),
    ("Copy /etc/app.conf to ~/backup before you start.", "Kopieren Sie /etc/app.conf vor dem Start nach ~/backup."),
    ("Version 2.5 is out", "Version 2,5 ist erschienen"),  # the number changed: nothing copyable but "Version"
    ("Press 1 then 1 again", "Drücken Sie 1, dann wieder 1"),  # twice on each side: which is which is unknown
    ("Hello world", "Hallo Welt"),
    ("Deleted {count} files", "{count} Dateien gelöscht"),  # braces of its own: left alone
]


def _restore(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\d+)\}", lambda m: values[m.group(1)], text)


def test_placeholder_copies_stand_for_the_same_token_on_both_sides() -> None:
    copies = placeholder_copies(PROSE * 20, rate=1.0, seed=1)
    originals = set(PROSE)
    seen = set()
    for source, target in copies:
        numbers = re.findall(r"\{(\d+)\}", source)
        assert numbers == [str(n) for n in range(1, len(numbers) + 1)]  # numbered in the source's order
        assert sorted(re.findall(r"\{(\d+)\}", target)) == sorted(numbers)
        # some choice of one token per number gives back an original pair on both sides at once
        matches = []
        for original in originals:
            pattern = re.escape(source)
            for n in numbers:
                pattern = pattern.replace(re.escape("{" + n + "}"), f"(?P<p{n}>.+?)", 1)
            m = re.fullmatch(pattern, original[0])
            if m and _restore(target, {n: m.group(f"p{n}") for n in numbers}) == original[1]:
                matches.append(original)
        assert len(matches) == 1, (source, target)
        seen.add(matches[0])
        assert 1 <= len(numbers) <= 3
    assert {p[0] for p in seen} == {p[0] for p in PROSE[:4]}  # every pair with a copyable token, no other one
    assert not any("Hello" in s or "Press" in s or "count" in s for s, _ in copies)


def test_placeholder_copies_rate_and_seed() -> None:
    many = PROSE[:4] * 500
    assert placeholder_copies(many, 0.0, seed=1) == []
    assert 0.2 < len(placeholder_copies(many, 0.3, seed=1)) / len(many) < 0.4
    assert placeholder_copies(many, 0.3, seed=1) == placeholder_copies(many, 0.3, seed=1)
    assert placeholder_copies(many, 0.3, seed=1) != placeholder_copies(many, 0.3, seed=2)
    with pytest.raises(ConfigError, match="placeholder_copies"):
        Config.from_dict({"data": {"placeholder_copies": 1.5}})


def test_training_adds_the_filled_copies(synthetic_corpus, tiny_vocab, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from testkit.tiny import tiny_config
    from training.train import Trainer

    train = tmp_path / "train.tsv"
    base = synthetic_corpus[0].read_text(encoding="utf-8").splitlines()
    extra = [
        "a %s b\tb %s a",
        "c {x} d\td {x} c",
        "e %d f\tf g",
        "g 42 h\th 42 g",
    ]  # the third one's target lacks the %d
    train.write_text("\n".join(base + extra) + "\n", encoding="utf-8")
    counts = {}
    for fills in (0, 3):
        cfg = tiny_config(train, synthetic_corpus[1], tiny_vocab)
        cfg.data.placeholder_fills = fills
        trainer = Trainer(cfg, tmp_path / f"run{fills}")
        trainer.load_data()
        counts[fills] = len(trainer.train)
    assert counts[3] == counts[0] + 3 * 2

    cfg = tiny_config(train, synthetic_corpus[1], tiny_vocab)
    cfg.data.placeholder_copies = 1.0
    trainer = Trainer(cfg, tmp_path / "copies")
    trainer.load_data()
    pairs = [tuple(line.split("\t")) for line in base + extra]
    added = placeholder_copies(pairs, 1.0, cfg.train.seed)  # type: ignore[arg-type]
    assert added and len(trainer.train) == counts[0] + len(added)


def test_synthetic_pairs_train_beside_the_real_ones_and_only_they_carry_the_tag(  # type: ignore[no-untyped-def]
    synthetic_corpus, tiny_vocab, tmp_path
) -> None:
    from testkit.tiny import tiny_config
    from training.train import Trainer

    bt = tmp_path / "bt.tsv"
    bt.write_text("red blue\tblau rot\ngold\tgold\n", encoding="utf-8")
    sizes, tagged = {}, {}
    for tag in (None, False, True):
        cfg = tiny_config(synthetic_corpus[0], synthetic_corpus[1], tiny_vocab)
        if tag is not None:
            cfg.data.synthetic, cfg.data.tag_synthetic = str(bt), tag
        trainer = Trainer(cfg, tmp_path / f"run-{tag}")
        trainer.load_data()
        bos = trainer.tokenizer.specials.bos_id
        sizes[tag] = len(trainer.train)
        tagged[tag] = [src[1:] for src, _ in trainer.train if src[0] == bos]
        assert all(bos not in src[1:] for src, _ in trainer.train) and all(bos not in src for src, _ in trainer.dev)
    assert sizes[False] == sizes[True] == sizes[None] + 2
    assert tagged[None] == tagged[False] == []
    assert tagged[True] == [trainer.tokenizer.encode_source("red blue"), trainer.tokenizer.encode_source("gold")]
