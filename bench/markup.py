"""Markup on real pages: do the tags land around the right words, and do catalog placeholders survive?

    python -m bench markup [--bundle models/en-de] [--corpus data/en-de] [--cache cache/corpus]
                           [--lexical-boost X] [--out docs/reports/markup/report]

Tags: the paragraphs of the held-out LibreOffice help pages (the test units of the corpus's report.json) whose
English and German versions (same page, same paragraph id) carry the same inline elements (name and class), and
the same from the held-out GIMP manual pages (leaf paragraphs paired by position where both pages have as many). The
English paragraph's HTML goes through the server's path (core/markup.py: segments, the engine's translation with
its word alignment, tags put back); each inline element of the output is compared with the same element of the
human German paragraph (same name and class, in order): *exact* when it encloses the same words (case and
punctuation aside), and the word-overlap F1. The same translations with the tags placed by relative position
instead of the alignment are the baseline; "copies + alignment" is what the server does (a word the translation
copied verbatim, such as a name, takes its tag before the alignment is asked). Where the translation holds every
word the reference's element encloses, placing the tag is all that is left to do: the last column counts those
elements and how many were placed exactly, the alignment's own score. ``--lexical-boost X`` weighs the alignment's
lexicon so (inference/alignment.py; 0: the attention alone).

Placeholders: the held-out catalogs of the software-UI test set; every entry with a placeholder is emptied and
filled through the document path (core/documents.py). Counted: entries where the model itself kept every
placeholder (none had to be appended), and entries whose result passes ``msgfmt --check-format``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.loadtools import report_dir, report_path, write_report

INLINE_CHECKED = ("a", "b", "em", "i", "span", "strong", "code")
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def inner_html(element: object) -> str:
    import lxml.html

    text = element.text or ""  # type: ignore[attr-defined]
    return text + "".join(lxml.html.tostring(child, encoding="unicode") for child in element)  # type: ignore[attr-defined]


def elements(markup: str) -> list[tuple[str, list[str]]]:
    """(name.class, enclosed words) of each checked inline element, in document order."""
    import lxml.html

    root = lxml.html.fragment_fromstring(markup, create_parent="div")
    return [
        (f"{e.tag}.{e.get('class', '')}", words(e.text_content())) for e in root.iter(*INLINE_CHECKED) if e is not root
    ]


def help_pairs(corpus: Path, cache: Path, limit: int) -> list[tuple[str, str]]:
    """(English, German) inner HTML of held-out help paragraphs with the same inline elements on both sides."""
    import lxml.html

    report = json.loads((corpus / "report.json").read_text(encoding="utf-8"))
    units = [u.split(":", 1)[1] for u in report["heldout_units"]["test"]["libreoffice-help"]]
    [en_root] = list(cache.glob("extract/libreoffice-help-en-us_*/usr/share/libreoffice/help/en-US"))
    [de_root] = list(cache.glob("extract/libreoffice-help-de_*/usr/share/libreoffice/help/de"))
    pairs = []
    for unit in units:
        sides = []
        for root in (en_root, de_root):
            doc = lxml.html.fromstring((root / unit).read_bytes(), parser=lxml.html.HTMLParser(encoding="utf-8"))
            for switch in doc.find_class("switchinline"):
                switch.drop_tree()
            sides.append(
                {e.get("id"): e for e in doc.iter("p", "h1", "h2", "h3") if (e.get("id") or "").startswith("par_id")}
            )
        for key, en in sides[0].items():
            de = sides[1].get(key)
            if de is None:
                continue
            en_html, de_html = inner_html(en).strip(), inner_html(de).strip()
            en_tags, de_tags = [t for t, _ in elements(en_html)], [t for t, _ in elements(de_html)]
            if en_tags and en_tags == de_tags and all(w for _, w in elements(de_html)):
                pairs.append((en_html, de_html))
    return pairs[:limit] if limit else pairs


def manual_pairs(corpus: Path, cache: Path, limit: int) -> list[tuple[str, str]]:
    """The same from the held-out GIMP manual pages: leaf paragraphs paired by position where both pages have as
    many, skipping those the translators left in English."""
    import lxml.html

    report = json.loads((corpus / "report.json").read_text(encoding="utf-8"))
    units = [
        u.split(":", 1)[1] for u in report["heldout_units"]["test"].get("manuals", []) if u.startswith("gimp-help:")
    ]
    roots = [
        next(cache.glob(f"extract/gimp-help-{lang}_*/usr/share/gimp/2.0/help/{lang}"), None) for lang in ("en", "de")
    ]
    if None in roots:
        return []
    pairs = []
    for unit in units:
        sides = []
        for root in roots:
            doc = lxml.html.fromstring((root / unit).read_bytes(), parser=lxml.html.HTMLParser(encoding="utf-8"))  # type: ignore[operator]
            leaves = [
                e
                for e in doc.iter("p")
                if not any(d.tag in ("p", "div", "ul", "ol", "table") for d in e.iterdescendants())
            ]
            sides.append([" ".join(inner_html(e).split()) for e in leaves])
        if len(sides[0]) != len(sides[1]):
            continue
        for en_html, de_html in zip(*sides, strict=True):
            if en_html == de_html or words(_text(en_html)) == words(_text(de_html)):
                continue
            en_tags, de_tags = [t for t, _ in elements(en_html)], [t for t, _ in elements(de_html)]
            if en_tags and en_tags == de_tags and all(w for _, w in elements(de_html)):
                pairs.append((en_html, de_html))
    return pairs[:limit] if limit else pairs


def _text(markup: str) -> str:
    import lxml.html

    return str(lxml.html.fragment_fromstring(markup, create_parent="div").text_content())


def translate_segments(engine: object, texts: list[str]) -> list[tuple[str, list[tuple[int, int, float]]]]:
    """Each text translated like the server does it (sentence split, beam 4, its defaults), with word links."""
    from core.sentences import split_sentences
    from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
    from service.results import Wanted, text_translation

    options = DecodeOptions(
        length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE, return_attention=True
    )
    out = []
    for text in texts:
        split = split_sentences(text, "en")
        translations = engine.translate(split.sentences, options) if split.sentences else []  # type: ignore[attr-defined]
        result = text_translation(split, translations, Wanted(attention=True))
        out.append((result.text, [(link.target, link.source, link.weight) for link in result.alignment or []]))
    return out


def score_tags(engine: object, pairs: list[tuple[str, str]]) -> dict[str, object]:
    from core.markup import parse_html, render

    documents = [parse_html(en) for en, _ in pairs]
    segments = [s for d in documents for s in d.segments]
    started = time.monotonic()
    done = translate_segments(engine, [s.text for s in segments])
    seconds = time.monotonic() - started
    methods = ("copies + alignment", "alignment", "position")
    results: dict[str, Counter[str]] = {m: Counter() for m in methods}
    f1: dict[str, list[float]] = {m: [] for m in methods}
    examples = []
    at = 0
    for document, (en, de) in zip(documents, pairs, strict=True):
        mine = done[at : at + len(document.segments)]
        at += len(document.segments)
        reference = elements(de)
        for method in methods:
            rendered = [
                render(seg, text, [] if method == "position" else links, copies=method.startswith("copies"))
                for seg, (text, links) in zip(document.segments, mine, strict=True)
            ]
            output = "".join(p if isinstance(p, str) else rendered[p] for p in document.parts)
            got = elements(output)
            if [t for t, _ in got] != [t for t, _ in reference]:
                results[method]["tags changed"] += 1
                continue
            right = 0
            translated = Counter(words(_text(output)))
            for (_, hyp), (_, ref) in zip(got, reference, strict=True):
                exact = sorted(hyp) == sorted(ref)
                right += exact
                results[method]["elements"] += 1
                results[method]["exact"] += exact
                if not Counter(ref) - translated:  # the translation has the reference's words: placing is all
                    results[method]["held"] += 1
                    results[method]["held exact"] += exact
                common = sum((Counter(hyp) & Counter(ref)).values())
                f1[method].append(2 * common / (len(hyp) + len(ref)) if hyp or ref else 1.0)
            results[method]["paragraphs"] += 1
            results[method]["all exact"] += right == len(got)
            if method == methods[0] and len(examples) < 6:
                examples.append({"source": en, "output": output, "reference": de})
    summary: dict[str, object] = {"paragraphs": len(pairs), "seconds": round(seconds, 1), "examples": examples}
    for method in results:
        counts = results[method]
        summary[method] = {
            "exact_elements_pct": round(100 * counts["exact"] / max(1, counts["elements"]), 1),
            "mean_f1": round(sum(f1[method]) / max(1, len(f1[method])), 3),
            "paragraphs_all_exact_pct": round(100 * counts["all exact"] / max(1, counts["paragraphs"]), 1),
            "elements": counts["elements"],
            "held_elements": counts["held"],
            "held_exact_pct": round(100 * counts["held exact"] / max(1, counts["held"]), 1),
            "tags_changed": counts["tags changed"],
        }
    return summary


def held_out_catalog_entries(corpus: Path, cache: Path) -> list[tuple[str, str, list[str]]]:
    """(msgid, reference msgstr, flags) of held-out software-UI catalog entries holding a placeholder."""
    import polib

    from core.strings import PLACEHOLDERS as _PLACEHOLDERS

    report = json.loads((corpus / "report.json").read_text(encoding="utf-8"))
    entries = []
    for unit in report["heldout_units"]["test"]["software-ui"]:
        _, package, path = unit.split(":", 2)
        found = [p for p in cache.glob(f"extract/*/{path}")] + [p for p in cache.glob(f"extract/{package}*/{path}")]
        if not found:
            continue
        catalog = polib.mofile(str(found[0])) if found[0].suffix == ".mo" else polib.pofile(str(found[0]))
        for entry in catalog:
            if entry.msgid and entry.msgstr and not entry.msgid_plural and _PLACEHOLDERS.search(entry.msgid):
                entries.append((entry.msgid, entry.msgstr, list(entry.flags)))
    return entries


def score_placeholders(engine: object, entries: list[tuple[str, str, list[str]]]) -> dict[str, object]:
    import polib

    from core.documents import read_document
    from core.strings import PLACEHOLDERS as _PLACEHOLDERS

    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    for msgid, _, flags in entries:
        flags = flags or (["c-format"] if re.search(r"%[sd]", msgid) else [])
        catalog.append(polib.POEntry(msgid=msgid, msgstr="", flags=flags))
    document = read_document("held-out.po", str(catalog).encode())
    done = translate_segments(engine, [s.text for s in document.segments])
    model_kept = sum(
        all(key in text for key in segment.literals) for segment, (text, _) in zip(document.segments, done, strict=True)
    )
    filled = polib.pofile(document.rebuild(done).decode())
    survived = sum(
        Counter(_PLACEHOLDERS.findall(e.msgstr)) == Counter(_PLACEHOLDERS.findall(e.msgid)) for e in filled if e.msgid
    )
    msgfmt_ok: int | None = None
    if shutil.which("msgfmt"):
        msgfmt_ok = 0
        for entry in filled:
            if not entry.msgid:
                continue
            single = polib.POFile()
            single.metadata = catalog.metadata
            single.append(entry)
            with tempfile.NamedTemporaryFile("w", suffix=".po", delete=False, encoding="utf-8") as handle:
                handle.write(str(single))
            check = subprocess.run(["msgfmt", "--check-format", "-o", "/dev/null", handle.name], capture_output=True)
            Path(handle.name).unlink()
            msgfmt_ok += check.returncode == 0
    n = len(entries)
    return {
        "entries": n,
        "kept_by_the_model_pct": round(100 * model_kept / max(1, n), 1),
        "survived_pct": round(100 * survived / max(1, n), 1),
        "msgfmt_check_format_pct": None if msgfmt_ok is None else round(100 * msgfmt_ok / max(1, n), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default="models/en-de")
    parser.add_argument("--corpus", type=Path, default=Path("data/en-de"))
    parser.add_argument("--cache", type=Path, default=Path("cache/corpus"))
    parser.add_argument("--limit", type=int, default=0, help="at most this many help paragraphs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--lexical-boost",
        type=float,
        default=None,
        help="weigh the alignment's lexicon this much (inference/alignment.py's LEXICAL_BOOST; 0: attention alone)",
    )
    parser.add_argument("--out", default=str(report_dir("markup") / "report"))
    args = parser.parse_args(argv)
    from inference.engine import Engine

    engine = Engine.load(args.bundle, provider="cpu", threads=args.threads)
    if args.lexical_boost is not None:
        engine.lexical_boost = args.lexical_boost
    manifest = engine.manifest
    sources = {
        "LibreOffice help": help_pairs(args.corpus, args.cache, args.limit),
        "GIMP manual": manual_pairs(args.corpus, args.cache, args.limit),
    }
    tags = {name: score_tags(engine, pairs) for name, pairs in sources.items() if pairs}
    placeholders = score_placeholders(engine, held_out_catalog_entries(args.corpus, args.cache))
    rows = [
        "| held-out pages | paragraphs | tags placed by | inline elements | exactly the reference's words "
        "| mean word F1 | paragraphs all exact | where the translation has the reference's words: elements, exact |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name, result in tags.items():
        for method in ("copies + alignment", "alignment", "position"):
            r = result[method]  # type: ignore[index]
            rows.append(
                f"| {name} | {result['paragraphs']} | {method} | {r['elements']} | {r['exact_elements_pct']}% "
                f"| {r['mean_f1']} | {r['paragraphs_all_exact_pct']}% | {r['held_elements']}, {r['held_exact_pct']}% |"
            )
    table = "\n".join(rows)
    lines = [
        "| catalog entries with placeholders | kept by the model itself | survived (after the fallback) "
        "| msgfmt --check-format |",
        "|---:|---:|---:|---:|",
        f"| {placeholders['entries']} | {placeholders['kept_by_the_model_pct']}% | {placeholders['survived_pct']}% | "
        f"{placeholders['msgfmt_check_format_pct']}% |",
    ]
    print(table)
    print("\n".join(lines))
    markdown = (
        f"# Markup on real pages\n\n`python -m bench markup --bundle {args.bundle}` ({manifest.get('name')} "
        f"{manifest.get('version')}): held-out paragraphs whose English and German versions carry the same inline "
        "elements (LibreOffice help paired by paragraph id, GIMP manual pages by position).\n\n"
        + table
        + "\n\n"
        + "\n".join(lines)
        + "\n"
    )
    write_report(report_path(args.out, ""), markdown, {"tags": tags, "placeholders": placeholders})
    return 0


if __name__ == "__main__":
    sys.exit(main())
