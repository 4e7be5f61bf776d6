"""Which literals `bench literals` counts: those the reference repeats verbatim, characters the vocabulary lacks
or has rarely among them."""

from __future__ import annotations

import re

from bench.literals import literals


def rare(text: str) -> list[tuple[int, int]]:  # as Tokenizer.unknown_spans gives runs
    return [m.span() for m in re.finditer("[↓⌘àα]+", text)]


def test_a_literal_counts_only_where_the_reference_repeats_it() -> None:
    source = "Press Super↓ in /etc/x.conf with Déjà Dup, 3 times"
    reference = "Drücken Sie Super↓ in /etc/x.conf mit Déjà Dup, dreimal"
    assert literals(source, reference) == [("path", "/etc/x.conf")]
    assert literals(source, reference, rare) == [("path", "/etc/x.conf"), ("character", "↓"), ("character", "Déjà")]
    assert literals(source, "Drücken Sie Super-Pfeil mit Deja Dup", rare) == []


def test_a_character_inside_another_literal_is_not_counted_twice() -> None:
    source = "Open /usr/share/àb/c.txt now"
    assert literals(source, "Öffnen Sie /usr/share/àb/c.txt jetzt", rare) == [("path", "/usr/share/àb/c.txt")]
