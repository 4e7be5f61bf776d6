"""Teach the model to copy literals: training pairs with placeholders, filled in the same on both sides.

Software catalogs are full of pairs like ``Could not open %s`` / ``%s konnte nicht geöffnet werden``, but real
text has ``Could not open "config.yaml"`` or ``The file is larger than 25 MB`` where the catalog had ``%s`` or
``%d``. A model trained only on the catalogs' form learns to copy ``%s`` and never sees a file name, URL or
number it must pass through unchanged, and drops or mangles them. For every training pair whose two sides hold
the same placeholders, ``filled_copies`` adds copies with each placeholder replaced by one random literal, the
same on both sides: integers for ``%d``-like conversions, and for string ones (``%s``, ``%(name)s``, ``{name}``,
Qt's ``%1``) an integer, file name, path, URL, e-mail address, identifier or version number.

Placeholders correspond across the sides by position (``%1$s``, ``%1``), by name (``%(name)s``, ``{name}``) or,
for plain printf conversions, by order of occurrence (which printf itself requires). A pair whose placeholders
do not correspond exactly, or that holds a conversion whose rendering depends on the locale (``%f``, ``%g``:
2.5 is 2,5 in German), is left alone. The originals are kept: the copies are added. Deterministic in ``seed``.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Sequence

from core.protect import LITERAL

Pair = tuple[str, str]

_PRINTF = (
    r"%(?:(?P<pos>\d+)\$)?(?:\((?P<name>[A-Za-z_]\w*)\))?"  # %3$d, %(name)s
    r"[-+#0']*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L|q)?(?P<conv>[a-zA-Z])"  # flags, width, precision, length, conversion
)
PLACEHOLDER = re.compile(rf"%%|{_PRINTF}|%(?P<qt>\d{{1,2}})(?![\d$])|\{{(?P<brace>[A-Za-z_]\w*|\d+)\}}")
"""printf (``%s``, ``%3$d``, ``%(name)s``, ``%lu``), Qt (``%1``) and brace (``{name}``, ``{0}``) placeholders;
``%%`` is matched so that it is skipped, not read as the start of one."""

Found = list[tuple[tuple[str, str], str, tuple[int, int]]]
"""(key, kind, span) per placeholder."""

_INTEGER_CONVERSIONS = set("diu")
_STRING_CONVERSIONS = {"s"}

_EXTENSIONS = ("txt", "conf", "yaml", "json", "png", "jpg", "pdf", "csv", "log", "py", "html", "xml", "odt", "zip")
_DOMAINS = ("org", "com", "net", "de", "io")


def placeholders(text: str) -> Found | None:
    """(key, kind, span) of each placeholder in ``text``; None when one cannot be filled safely.

    ``key`` says which placeholder of the other side this one corresponds to; ``kind`` is ``int`` or ``any``.
    """
    found: Found = []
    sequence = 0
    for match in PLACEHOLDER.finditer(text):
        if match.group(0) == "%%":
            continue
        if match.group("brace") is not None:
            found.append((("brace", match.group("brace")), "any", match.span()))
            continue
        if match.group("qt") is not None:
            found.append((("pos", match.group("qt")), "any", match.span()))
            continue
        conv = match.group("conv")
        if conv in _INTEGER_CONVERSIONS:
            kind = "int"
        elif conv in _STRING_CONVERSIONS:
            kind = "any"
        else:
            return None  # %f, %g, %x, %c, gcc's %L, ...: locale-dependent or not a literal we can invent
        if match.group("pos"):
            key = ("pos", match.group("pos"))
        elif match.group("name"):
            key = ("name", match.group("name"))
        else:
            key, sequence = ("seq", str(sequence)), sequence + 1
        found.append((key, kind, match.span()))
    return found


def _stands_alone(text: str, spans: Found) -> bool:
    """No placeholder touches a letter, digit or another placeholder (``%s%s``, ``%szum``): filled, such
    spots give run-together text that teaches nothing about copying."""
    starts = {span[0] for _, _, span in spans}
    ends = {span[1] for _, _, span in spans}
    for _, _, (start, end) in spans:
        if start > 0 and (text[start - 1].isalnum() or start in ends):
            return False
        if end < len(text) and (text[end].isalnum() or end in starts):
            return False
    return True


def _fill(text: str, spans: Found, values: dict[tuple[str, str], str]) -> str:
    out, last = [], 0
    for key, _, (start, end) in spans:
        out += [text[last:start], values[key]]
        last = end
    return "".join(out + [text[last:]])


def literal_makers(words: Sequence[str]) -> dict[str, Callable[[random.Random], str]]:
    """Random literals of each kind, built from ``words`` (plain lowercase words) and digits."""

    def word(rng: random.Random) -> str:
        return rng.choice(words)

    def integer(rng: random.Random) -> str:
        return str(rng.choice((rng.randint(0, 9), rng.randint(10, 99), rng.randint(100, 999), rng.randint(1000, 9999))))

    return {
        "integer": integer,
        "file": lambda rng: (
            word(rng)
            + rng.choice(("", f"_{word(rng)}", f"-{word(rng)}", str(rng.randint(1, 99))))
            + f".{rng.choice(_EXTENSIONS)}"
        ),
        "path": lambda rng: (
            rng.choice(("/etc/", "/usr/share/", "/var/log/", "~/", "C:\\Users\\"))
            + "/".join(word(rng) for _ in range(rng.randint(1, 2)))
        ),
        "url": lambda rng: (
            f"https://{rng.choice(('', 'www.', 'docs.'))}{word(rng)}.{rng.choice(_DOMAINS)}"
            + rng.choice(("", "/", f"/{word(rng)}", f"/{word(rng)}/{word(rng)}.html"))
        ),
        "email": lambda rng: f"{word(rng)}@{word(rng)}.{rng.choice(_DOMAINS)}",
        "identifier": lambda rng: rng.choice(
            (
                f"{word(rng)}_{word(rng)}",
                word(rng).capitalize() + word(rng).capitalize(),
                f"{word(rng).upper()}_{word(rng).upper()}",
            )
        ),
        "version": lambda rng: ".".join(str(rng.randint(0, 20)) for _ in range(rng.randint(2, 3))),
    }


def words_of(pairs: Sequence[Pair], limit: int = 5000) -> list[str]:
    """The ``limit`` most frequent plain lowercase English words (3-10 letters) of the source sides."""
    counts: dict[str, int] = {}
    for source, _ in pairs:
        for token in re.findall(r"\b[a-z]{3,10}\b", source):
            counts[token] = counts.get(token, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))[:limit]


def filled_copies(pairs: Sequence[Pair], copies: int, seed: int) -> list[Pair]:
    """``copies`` filled copies of every pair whose two sides hold the same fillable placeholders."""
    if copies <= 0:
        return []
    rng = random.Random(seed * 7919 + 17)
    makers = literal_makers(words_of(pairs) or ["file"])
    kinds = list(makers)
    out: list[Pair] = []
    for source, target in pairs:
        if "%" not in source and "{" not in source:
            continue
        src, tgt = placeholders(source), placeholders(target)
        if not src or tgt is None or sorted((k, kind) for k, kind, _ in src) != sorted((k, kind) for k, kind, _ in tgt):
            continue
        if not (_stands_alone(source, src) and _stands_alone(target, tgt)):
            continue
        for _ in range(copies):
            values: dict[tuple[str, str], str] = {}
            for key, kind, _ in src:
                if key not in values:
                    # numbers are what real text has most where catalogs have %s: a third of the fills
                    literal = "integer" if kind == "int" or rng.random() < 1 / 3 else rng.choice(kinds)
                    values[key] = makers[literal](rng)
            out.append((_fill(source, src, values), _fill(target, tgt, values)))
    return out


_TOKEN = re.compile(r"\S+")
_EDGE_PUNCTUATION = ".,;:!?()[]\"'«»„“”‘’‹›"
_SYMBOL_CATEGORIES = ("Sc", "Sm", "So")
_DIGIT = re.compile(r"\d")


def _has_digit(token: str) -> bool:
    """``any(c.isdigit() for c in token)``, which ``\\d`` answers alone for ASCII (most tokens), without the loop."""
    return bool(_DIGIT.search(token)) or (not token.isascii() and any(c.isdigit() for c in token))


def _copyable(token: str) -> bool:
    """A token the server's reading would make a placeholder, or one as likely to stand for one: anything with a
    digit, a literal of core.protect's kinds, a name with a capital past its first letter (GIMP, LibreOffice), a
    lone symbol (€, →, ©)."""
    if _has_digit(token) or LITERAL.fullmatch(token):
        return True
    if len(token) == 1:
        return unicodedata.category(token) in _SYMBOL_CATEGORIES
    rest = token[1:]
    return token.isascii() and rest != rest.lower() and token.replace("-", "").isalnum()  # ASCII: a capital in rest


def _spans(text: str, token: str) -> list[tuple[int, int]]:
    """Where ``token`` stands alone in ``text`` (not inside a longer word or number)."""
    return [m.span() for m in re.finditer(rf"(?<![\w./-]){re.escape(token)}(?![\w/-]|[.,]\w)", text)]


def _numbered(text: str, spans: list[tuple[int, tuple[int, int]]]) -> str:
    """``text`` with each span replaced by its ``{number}``."""
    for number, (start, end) in sorted(spans, key=lambda item: -item[1][0]):
        text = text[:start] + f"{{{number}}}" + text[end:]
    return text


def _overlap(spans: list[tuple[int, int]]) -> bool:
    return any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False))


def placeholder_copies(pairs: Sequence[Pair], rate: float, seed: int, most: int = 3) -> list[Pair]:
    """Copies of a ``rate`` share of the pairs that hold a token found once, unchanged, on both sides (a number, a
    literal, a name like GIMP, a symbol), with up to ``most`` such tokens replaced by ``{1}``, ``{2}``, ... in the
    source's order, the same number on both sides: the sentence as the server's reading gives it to the model
    (core/protect.py). The catalogs teach ``{n}`` only in short UI strings, so in prose a model dropped it or
    wrote a catalog word ("Budget") in its place. Pairs that already hold a brace are left alone."""
    if rate <= 0:
        return []
    rng = random.Random(seed * 104729 + 3)
    out: list[Pair] = []
    for source, target in pairs:
        if "{" in source or "{" in target:
            continue
        found: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
        for match in _TOKEN.finditer(source):
            token = match.group(0).strip(_EDGE_PUNCTUATION) or match.group(0)
            if token in found or not _copyable(token):
                continue
            in_source, in_target = _spans(source, token), _spans(target, token)
            if len(in_source) == 1 and len(in_target) == 1:
                found[token] = (in_source[0], in_target[0])
        if not found or rng.random() >= rate:
            continue
        chosen = rng.sample(sorted(found), min(most, len(found), rng.randint(1, most)))
        spans = sorted(found[token] for token in chosen)
        if _overlap([s for s, _ in spans]) or _overlap(sorted(t for _, t in spans)):
            continue
        numbered = list(enumerate(spans, start=1))
        new_source = _numbered(source, [(n, src) for n, (src, _) in numbered])
        new_target = _numbered(target, [(n, tgt) for n, (_, tgt) in numbered])
        out.append((new_source, new_target))
    return out
