"""KDE handbooks: pages read out of the rendered ``index.cache.bz2`` of each language, paired by name and
aligned by the DocBook-manual aligner; an opt-in, training-only source."""

from __future__ import annotations

import bz2
from pathlib import Path

import pytest

from testkit.corpus import catalog_pairs, held_out_pairs
from training.corpus.collect import resolve_sources
from training.corpus.docbook import extract_docbook_pairs
from training.corpus.kde import cache_pages, handbook_pages
from training.corpus.sources import SOURCES, CorpusError, Pair
from training.corpus.split import assemble_corpus

# The shape of a page from KDE's stylesheets: the banner, a navigation table over and under the content.
PAGE = """<html><head><title>{title}</title></head><body><div id="content"><div id="header"><div id="header_content">
<div id="header_right"><img src="help:/kdoctools5-common/top-kde.jpg"> {title}</div></div></div>
<div class="navCenter"><table class="navigation"><tr><td class="prevCell"><a href="index.html">{prev}</a></td>
<td class="nextCell"><a href="b.html">{next}</a></td></tr></table></div>
<div id="contentBody"><div class="chapter"><h1 class="title"><a name="use"></a>{chapter}</h1>
<p>{p1}</p><div class="itemizedlist"><ul><li><p>{li}</p></li></ul></div>
<pre class="screen">okular --page 3 file.pdf</pre></div></div>
<div id="footer"><div class="navCenter"><table class="navigation"><tr><td class="prevCell">{prev}</td></tr>
</table></div><div id="footer_text">{feedback}</div></div></div></body></html>"""

EN = {
    "title": "Basic Usage",
    "prev": "Prev",
    "next": "Next",
    "chapter": "Chapter 2. Basic Usage",
    "p1": "To view a file, select File → Open. Your file is then shown in the main window.",
    "li": "Click Open to open the file.",
    "feedback": "Would you like to make a comment?",
}
DE = {
    "title": "Grundlegende Bedienung",
    "prev": "Zurück",
    "next": "Weiter",
    "chapter": "Kapitel 2. Grundlegende Bedienung",
    "p1": "Um eine Datei anzuzeigen, wählen Sie Datei → Öffnen. Die Datei wird dann im Hauptfenster angezeigt.",
    "li": "Klicken Sie auf Öffnen, um die Datei zu öffnen.",
    "feedback": "Möchten Sie etwas kommentieren?",
}


def write_cache(path: Path, pages: dict[str, str]) -> Path:
    """An index.cache.bz2 as meinproc writes it: the pages one after the other, each behind its marker."""
    text = "".join(f'<FILENAME filename="{name}">{html}</FILENAME>' for name, html in pages.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bz2.compress(text.encode("utf-8")))
    return path


def test_cache_pages_are_split_at_their_markers(tmp_path: Path) -> None:
    cache = write_cache(tmp_path / "index.cache.bz2", {"index.html": "<p>one</p>", "use.html": "<p>twö</p>"})
    assert cache_pages(cache) == {"index.html": b"<p>one</p>", "use.html": "<p>twö</p>".encode()}
    (tmp_path / "broken.cache.bz2").write_bytes(b"not bz2")
    with pytest.raises(CorpusError, match="broken.cache.bz2"):
        cache_pages(tmp_path / "broken.cache.bz2")


def test_handbooks_pair_by_page_across_packages_without_navigation_or_code(tmp_path: Path) -> None:
    okular, k3b, k3b_i18n = tmp_path / "okular", tmp_path / "k3b", tmp_path / "k3b-i18n"
    html = "usr/share/doc/HTML"
    write_cache(okular / html / "en/okular/index.cache.bz2", {"use.html": PAGE.format(**EN), "x.html": "<p>x</p>"})
    write_cache(okular / html / "de/okular/index.cache.bz2", {"use.html": PAGE.format(**DE)})
    write_cache(okular / html / "fr/okular/index.cache.bz2", {"use.html": PAGE.format(**DE)})
    # k3b ships its English handbook, k3b-i18n the translations; kcontrol modules sit a folder deeper
    write_cache(k3b / html / "en/kcontrol/k3b/index.cache.bz2", {"use.html": PAGE.format(**EN)})
    write_cache(k3b_i18n / html / "de/kcontrol/k3b/index.cache.bz2", {"use.html": PAGE.format(**DE)})
    write_cache(k3b_i18n / html / "de/only-german/index.cache.bz2", {"use.html": PAGE.format(**DE)})
    pages = handbook_pages({"okular": okular, "k3b": k3b, "k3b-i18n": k3b_i18n})
    assert [unit for unit, _, _ in pages] == ["kcontrol/k3b/use.html", "okular/use.html"]
    notes: list[str] = []
    pairs = extract_docbook_pairs("kde-docs", pages, notes)
    expected = [
        ("Basic Usage", "Grundlegende Bedienung"),  # "Chapter 2." / "Kapitel 2." stripped
        ("To view a file, select File → Open.", "Um eine Datei anzuzeigen, wählen Sie Datei → Öffnen."),
        ("Your file is then shown in the main window.", "Die Datei wird dann im Hauptfenster angezeigt."),
        ("Click Open to open the file.", "Klicken Sie auf Öffnen, um die Datei zu öffnen."),
    ]
    assert [(p.en, p.de) for p in pairs] == expected * 2
    assert {p.unit for p in pairs} == {"okular/use.html", "kcontrol/k3b/use.html"} and not notes


def test_kde_sources_are_opt_in_and_never_held_out() -> None:
    kde = {"kde-docs", "kde-ui"}
    assert not kde & set(resolve_sources(None))  # the shipped model was not trained on them
    assert kde <= set(resolve_sources(["all", "kde"]))
    assert SOURCES["kde-docs"].debs == SOURCES["kde-ui"].debs  # one download for both
    pairs = [
        Pair(s, f"app{u}/page.html", f"Open {s} menu {u} and pick {i}.", f"Öffnen Sie {s}-Menü {u}, wählen Sie {i}.")
        for s in sorted(kde)
        for u in range(10)
        for i in range(30)
    ]
    splits = assemble_corpus(pairs, seed=1)
    assert len(splits.train) == len(pairs) and not splits.dev and not any(splits.test.values())


def test_training_only_sources_leave_dev_and_test_as_they_were() -> None:
    """Held-out strings that only the KDE catalogs make frequent stay held out (and leave KDE's training
    pairs), so that building with --sources all,kde scores on the same test sets as without."""
    ui = catalog_pairs()
    without = assemble_corpus(ui, seed=1)
    held = held_out_pairs(without)
    assert held
    kde = [Pair("kde-ui", f"app{u}.mo", p.en, f"{p.de} (KDE)") for p in held[:20] for u in range(5)]
    kde += [Pair("kde-ui", "app9.mo", "Only in KDE", "Nur in KDE")]
    with_kde = assemble_corpus(ui + kde, seed=1)
    assert with_kde.test == without.test and with_kde.dev == without.dev
    assert {p.en for p in with_kde.train if p.source == "kde-ui"} == {"Only in KDE"}
