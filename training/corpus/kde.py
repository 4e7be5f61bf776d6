"""KDE handbooks: the DocBook manuals KDE applications ship in English and German.

Debian's KDE packages carry each handbook as ``usr/share/doc/HTML/<lang>/<app>/index.docbook`` plus
``index.cache.bz2``, the manual rendered to HTML by KDE's stylesheets (meinproc): every page of the manual,
concatenated, each opened by a ``<FILENAME filename="page.html">`` marker. German handbooks are made from the
English DocBook through gettext catalogs, so both languages have the same pages with the same blocks; the
pages are paired by name and aligned block by block by the DocBook-manual aligner
(``training.corpus.docbook``). Reading the rendered cache rather than the DocBook source means KDE's entities
(``&kde;``, ``&Ctrl;``, ...) are already resolved the same way in both languages.

The same packages carry the applications' German message catalogs; the ``kde-ui`` source reads those with
the gettext aligner.
"""

from __future__ import annotations

import bz2
import re
from pathlib import Path

from training.corpus.docbook import Page
from training.corpus.sources import CorpusError

HANDBOOKS = "usr/share/doc/HTML"
CACHE = "index.cache.bz2"
_MARKER = re.compile(rb'<FILENAME filename="([^"]+)">')


def cache_pages(path: Path) -> dict[str, bytes]:
    """The pages of a handbook's ``index.cache.bz2``, by file name, in the cache's order."""
    try:
        text = bz2.decompress(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CorpusError(f"cannot read KDE handbook cache {path}: {exc}") from exc
    parts = _MARKER.split(text)  # [before the first marker, name, page, name, page, ...]
    names, pages = parts[1::2], parts[2::2]
    return {name.decode(): page.replace(b"</FILENAME>", b"") for name, page in zip(names, pages, strict=True)}


def handbook_pages(package_roots: dict[str, Path]) -> list[tuple[str, Page, Page]]:
    """(unit, English page, German page) for every page of every handbook shipped in both languages (by
    the same package or two, as k3b and k3b-i18n); the unit is ``<handbook>/<page>``, where a handbook may
    sit in sub-folders (``kcontrol/fonts``)."""
    caches: dict[str, dict[str, Path]] = {"en": {}, "de": {}}
    for root in package_roots.values():
        for language, found in caches.items():
            language_root = root / HANDBOOKS / language
            for cache in sorted(language_root.rglob(CACHE)) if language_root.is_dir() else []:
                found.setdefault(cache.parent.relative_to(language_root).as_posix(), cache)
    pages = []
    for handbook in sorted(caches["en"].keys() & caches["de"].keys()):
        english, german = caches["en"][handbook], caches["de"][handbook]
        en_pages, de_pages = cache_pages(english), cache_pages(german)
        for name, html in en_pages.items():
            if name in de_pages:
                en_page, de_page = Page(f"{english}:{name}", html), Page(f"{german}:{name}", de_pages[name])
                pages.append((f"{handbook}/{name}", en_page, de_page))
    return pages
