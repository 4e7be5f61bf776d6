"""The DocBook-manual aligner: HTML pages of two languages read into leaf blocks and paired by position."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.corpus.collect import resolve_sources
from training.corpus.docbook import (
    align_blocks,
    extract_docbook_pairs,
    pages_by_suffix,
    pages_in_directories,
    read_docbook_blocks,
    strip_numbers,
    untranslated,
)
from training.corpus.sources import CorpusError, Pair
from training.corpus.split import assemble_corpus

PAGE = """<html><head><title>{title}</title></head><body>
<div class="navheader"><table><tr><td>{prev}</td><th>{title}</th><td>{next}</td></tr></table></div>
<div class="sect1"><h2 class="title">5.3. {title}</h2>
<p>{p1}</p>
<div class="itemizedlist"><ul><li><p>{li}</p></li></ul></div>
<pre class="programlisting">gimp --batch '(script-fu)'</pre>
<div class="figure"><p class="title"><b>Figure 16.2. {figure}</b></p></div>
<p>{p2}</p>
</div>
<div class="navfooter"><table><tr><td>{prev}</td><td>{next}</td></tr></table></div>
</body></html>"""

EN = {
    "title": "Color Picker",
    "prev": "Prev",
    "next": "Next",
    "p1": "The Color Picker tool is used to select a color on any image opened on your screen. "
    "By clicking the mouse on a point in an image, you can change the active color.",
    "li": "Click on the image to pick a color.",
    "figure": "The tool options",
    "p2": "Sample average: the color is averaged over a square region.",
}
DE = {
    "title": "Farbpipette",
    "prev": "Zurück",
    "next": "Weiter",
    "p1": "Die Farbpipette dient dazu, eine Farbe aus einem beliebigen geöffneten Bild aufzunehmen. "
    "Durch einen Klick auf einen Punkt im Bild ändern Sie die aktive Farbe.",
    "li": "Klicken Sie in das Bild, um eine Farbe aufzunehmen.",
    "figure": "Die Werkzeugeinstellungen",
    "p2": "Sample average: the colour is averaged over a square region.",  # left in English by the translators
}


def write(root: Path, name: str, values: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.write_text(PAGE.format(**values), encoding="utf-8")
    return path


def test_blocks_are_leaves_in_order_without_navigation_or_code(tmp_path: Path) -> None:
    blocks = read_docbook_blocks(write(tmp_path, "a.html", EN))
    assert [tag for tag, _ in blocks] == ["h2", "p", "p", "p", "p"]  # the li's paragraph, not the li
    texts = [text for _, text in blocks]
    assert texts[0] == "5.3. Color Picker" and texts[3] == "Figure 16.2. The tool options"
    assert not any("Prev" in t or "script-fu" in t for t in texts)


def test_numbers_are_stripped_only_when_both_sides_carry_the_same_one() -> None:
    assert strip_numbers("5.3. Color Picker", "5.3. Farbpipette") == ("Color Picker", "Farbpipette")
    assert strip_numbers("Figure 16.2. Tool options", "Abbildung 16.2. Werkzeugeinstellungen") == (
        "Tool options",
        "Werkzeugeinstellungen",
    )
    assert strip_numbers("Part II. How do I", "Teil II. Vom Einsteiger") == ("How do I", "Vom Einsteiger")
    assert strip_numbers("5.3. Color Picker", "5.4. Farbpipette") == ("5.3. Color Picker", "5.4. Farbpipette")
    assert strip_numbers("Step 2. and 3.", "Schritt 2. und 3.") == ("Step 2. and 3.", "Schritt 2. und 3.")


def test_untranslated_blocks_are_recognised() -> None:
    assert untranslated("Sample average: the color is averaged.", "Sample average: the color is averaged.")
    assert untranslated("Figure: The selected layer after fit", "Abbildung: The selected layer after fit")
    assert not untranslated("Click on the image to pick a color.", "Klicken Sie in das Bild, um eine Farbe zu wählen.")
    assert not untranslated("RGB image", "RGB-Bild")  # too short to judge


def test_pages_align_by_position_and_skip_what_does_not_line_up(tmp_path: Path) -> None:
    en_root, de_root = tmp_path / "en", tmp_path / "de"
    write(en_root, "color-picker.html", EN)
    write(de_root, "color-picker.html", DE)
    write(en_root, "only-english.html", EN)
    write(en_root, "changed.html", EN)
    (de_root / "changed.html").write_text(
        PAGE.format(**DE).replace("aufzunehmen. Durch", "aufzunehmen.</p><p>Durch"), encoding="utf-8"
    )  # the German page has one paragraph more: another version of the page
    notes: list[str] = []
    pages = pages_in_directories(en_root, de_root)
    assert [unit for unit, _, _ in pages] == ["changed.html", "color-picker.html"]  # only-english has no pair
    pairs = extract_docbook_pairs("gimp-help", pages, notes)
    assert {p.unit for p in pairs} == {"color-picker.html"}
    got = [(p.en, p.de) for p in pairs]
    assert got == [
        ("Color Picker", "Farbpipette"),
        (
            "The Color Picker tool is used to select a color on any image opened on your screen.",
            "Die Farbpipette dient dazu, eine Farbe aus einem beliebigen geöffneten Bild aufzunehmen.",
        ),
        (
            "By clicking the mouse on a point in an image, you can change the active color.",
            "Durch einen Klick auf einen Punkt im Bild ändern Sie die aktive Farbe.",
        ),
        ("Click on the image to pick a color.", "Klicken Sie in das Bild, um eine Farbe aufzunehmen."),
        ("The tool options", "Die Werkzeugeinstellungen"),
    ]
    assert any("1 pages: no section lines up" in n and "changed.html" in n for n in notes)
    assert any("1 blocks left in English" in n for n in notes)
    with pytest.raises(CorpusError, match="manual directories missing"):
        pages_in_directories(tmp_path / "nowhere", de_root)


def test_pages_side_by_side_pair_by_their_language_suffix(tmp_path: Path) -> None:
    write(tmp_path, "ch01.en.html", EN)
    write(tmp_path, "ch01.de.html", DE)
    write(tmp_path, "ch02.en.html", EN)
    pages = pages_by_suffix(tmp_path, tmp_path)
    assert pages == [("ch01.html", tmp_path / "ch01.en.html", tmp_path / "ch01.de.html")]
    assert ("Color Picker", "Farbpipette") in [(p.en, p.de) for p in extract_docbook_pairs("ref", pages, [])]


def test_the_manuals_are_default_sources_and_give_test_pairs_but_no_dev_pairs() -> None:
    manuals = {"gimp-help", "debian-reference", "debian-edu-doc"}
    assert manuals <= set(resolve_sources(None))  # in the default corpus since model 0.3.0
    assert manuals <= set(resolve_sources(["manuals"])) < set(resolve_sources(None))
    pairs = [
        Pair("gimp-help", f"page{u}.html", f"Select the {u} tool number {i} here.", f"Wählen Sie Werkzeug {i} von {u}.")
        for u in range(40)
        for i in range(60)
    ]
    splits = assemble_corpus(pairs, seed=1)
    assert splits.test["manuals"] and not splits.dev
    held = {p.unit for p in splits.test["manuals"]}
    assert held and not held & {p.unit for p in splits.train}


def test_pages_that_differ_somewhere_keep_the_sections_that_line_up() -> None:
    en = [("h1", "Manual"), ("p", "Intro."), ("h2", "1.1. Install"), ("p", "Run the installer."), ("p", "Reboot.")]
    en += [("h2", "1.2. Use"), ("p", "Start it.")]
    de = [("h1", "Handbuch"), ("p", "Einleitung."), ("h2", "1.1. Installation"), ("p", "Installer starten.")]
    de += [("h2", "1.2. Benutzung"), ("p", "Starten Sie es.")]
    pairs, skipped = align_blocks(en, de)  # the German 1.1 lost a paragraph: only that section goes
    assert pairs == [("Manual", "Handbuch"), ("Intro.", "Einleitung."), ("1.2. Use", "1.2. Benutzung")] + [
        ("Start it.", "Starten Sie es.")
    ]
    assert skipped == 1
    renumbered = [*de[:4], ("h2", "1.3. Benutzung"), de[5]]  # same shape, other section: not paired
    assert align_blocks(en[:4] + en[5:], renumbered) == (
        [("Manual", "Handbuch"), ("Intro.", "Einleitung.")]
        + [
            ("1.1. Install", "1.1. Installation"),
            ("Run the installer.", "Installer starten."),
        ],
        1,
    )
    assert align_blocks(en, de[:2]) == ([], 4)  # another number of sections: nothing
    assert align_blocks([], []) == ([], 0)


SPHINX_PAGE = """<html><body>
<div class="related"><ul><li><a href="index.html">{nav}</a> &#187;</li></ul></div>
<div class="body"><section><h1>{title}<a class="headerlink" href="#t" title="Permalink">¶</a></h1>
<p>{p1}</p></section></div>
<div class="sphinxsidebar"><p>{nav}</p></div>
<div class="footer">&#169; Copyright {nav}</div>
</body></html>"""


def test_sphinx_pages_lose_navigation_sidebar_footer_and_permalinks(tmp_path: Path) -> None:
    page = tmp_path / "l10n.html"
    page.write_text(SPHINX_PAGE.format(nav="Home", title="Be kind to translators", p1="Ask before you change."))
    assert read_docbook_blocks(page) == [("h1", "Be kind to translators"), ("p", "Ask before you change.")]


def test_debian_documentation_sources_are_opt_in_and_never_held_out() -> None:
    debian_docs = {"installation-guide", "developers-reference", "maint-guide", "debian-faq"}
    assert not debian_docs & set(resolve_sources(None))  # the shipped model was not trained on them
    assert debian_docs <= set(resolve_sources(["all", "debian-docs"]))
    pairs = [
        Pair(s, f"page{u}.html", f"Read chapter {u} step {i} of {s}.", f"Lesen Sie Kapitel {u}, Schritt {i}, {s}.")
        for s in sorted(debian_docs)
        for u in range(10)
        for i in range(30)
    ]
    splits = assemble_corpus(pairs, seed=1)
    assert len(splits.train) == len(pairs) and not splits.dev and not any(splits.test.values())
