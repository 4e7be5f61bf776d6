"""App string resources: JSON message files (.json), Android string resources (.xml), Apple ``.strings`` and Java
``.properties``; every string translated, keys, comments and layout kept.

Each string's placeholders, keyboard accelerator (where the format has them) and outer whitespace go through
core/strings.py: ``%1$s``, ``%@``, ``{name}``, ``{{count}}``, ``{0}`` come back verbatim. A string with nothing
to translate (only placeholders, digits and punctuation) is left as it is, and so is one in ICU's plural or
select syntax (``{count, plural, one {...} other {...}}``), whose branches a sentence model would break.

- JSON (and Flutter's ``.arb``): every string value, at any depth, keys untouched (i18next, vue-i18n, Angular,
  ...), but not under keys that start with ``@`` (ARB's metadata; ``@@locale`` becomes the target language). A
  WebExtension's
  ``messages.json`` (every entry an object with a ``message``) has its messages translated, not the
  ``description`` notes for translators nor the ``placeholders``. Written back with the file's indentation,
  keys in their order, non-ASCII as it is.
- Android (``<resources>``): ``<string>``, ``<string-array>`` items and ``<plurals>`` items, without those marked
  ``translatable="false"``; inline ``<b>``, ``<i>``, ``<u>``, ``<font>``, ``<a>`` go back on the aligned words,
  ``<xliff:g>`` (text that must not be translated) and ``\\n``, ``\\t``, ``\\uXXXX`` are placeholders; apostrophes
  and quotes are escaped again as Android wants (``\\'``, ``\\"``).
- Apple ``.strings``: ``"key" = "value";`` lines, comments kept; UTF-8 or UTF-16 (written back as read).
- Java ``.properties``: ``key = value`` (``:`` or a space as the separator too), continuation lines joined, ``\\uXXXX``
  and the other escapes read; written back one line per entry, non-ASCII as ``\\uXXXX`` (the format's own
  encoding).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.inline import TaggedText
from core.markup import Links, Segment, render
from core.office import xml_parser
from core.strings import PLACEHOLDERS, Protected, has_words, protect, restore

MAX_DEPTH = 200
"""JSON nested deeper is refused (no message file is)."""
_ICU = re.compile(r"\{\s*\w+\s*,\s*(?:plural|select|selectordinal)\s*,")


class ResourceError(ValueError):
    """The file is not the string resource its name says."""


@dataclass
class Resource:
    segments: list[Segment]
    rebuild: Callable[[list[tuple[str, Links]], str | None], bytes]


def _protected(value: str, accelerators: bool = False) -> Protected | None:
    """The string ready to translate, or None when it is to be left as it is."""
    if _ICU.search(value):
        return None
    protected = protect(value, accelerators=accelerators)
    return protected if protected.translatable else None


# --- JSON ---


def read_json(text: str) -> Resource:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ResourceError(f"not JSON: {err}") from None
    except RecursionError:
        raise ResourceError("nested too deep to be a message file") from None
    found: list[tuple[Any, Any, Protected]] = []  # (container, key or index, the string)
    extension = (
        isinstance(data, dict)
        and bool(data)
        and all(isinstance(v, dict) and isinstance(v.get("message"), str) for v in data.values())
    )

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(key, str) and key.startswith("@"):  # metadata (ARB's "@key" and "@@locale"): not text
                continue
            if isinstance(value, str):
                protected = _protected(value)
                if protected is not None:
                    found.append((node, key, protected))
            else:
                walk(value)

    if _depth(data) > MAX_DEPTH:  # json.loads takes deeper than Python's writer and walk() do
        raise ResourceError(f"nested more than {MAX_DEPTH} levels deep: not a message file")
    if extension:
        for entry in data.values():
            protected = _protected(entry["message"])
            if protected is not None:
                found.append((entry, "message", protected))
    else:
        walk(data)
    indent = re.search(r"\n([ \t]+)\S", text)

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        for (node, key, protected), (translated, _) in zip(found, done, strict=True):
            node[key] = restore(protected, translated)
        if target_lang and isinstance(data, dict) and isinstance(data.get("@@locale"), str):
            data["@@locale"] = target_lang
        out = json.dumps(data, ensure_ascii=False, indent=indent.group(1) if indent else 2)
        return (out + ("\n" if text.endswith("\n") else "")).encode("utf-8")

    return Resource([p.segment for *_, p in found], rebuild)


def _depth(node: Any) -> int:
    """How deep ``node`` nests, without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack += [(child, depth + 1) for child in children if isinstance(child, (dict, list))]
    return deepest


# --- Android ---

_ANDROID_TOKEN = re.compile(
    r"(?P<literal_tag><xliff:g\b[^>]*?(?:/>|>.*?</xliff:g>))"
    r"|(?P<tag><(?P<close>/)?(?P<name>[A-Za-z][\w:.-]*)\b[^>]*?(?P<empty>/)?>)"
    r"|(?P<escape>\\u[0-9a-fA-F]{4}|\\[nt])"
    r"|(?P<quote>\\['\"@?\\])"
    rf"|(?P<placeholder>{PLACEHOLDERS.pattern})"
    r"|(?P<entity>&(?:#\d+|#x[0-9a-fA-F]+|\w+);)",
    re.DOTALL,
)
_QUOTES_OUT = re.compile(r"(?<!\\)(['\"])")


def _android_segment(inner: str) -> Segment:
    """A string's content (its XML as written) as a segment: inline tags as spans, ``<xliff:g>``, escapes like
    ``\\n`` and placeholders as literals, ``\\'`` and ``\\"`` read as the characters."""
    import html

    built = TaggedText()
    quoted = len(inner.strip()) > 1 and inner.strip()[0] == inner.strip()[-1] == '"'
    body = inner.strip()[1:-1] if quoted else inner
    position = 0
    for match in _ANDROID_TOKEN.finditer(body):
        built.add(body[position : match.start()])
        position = match.end()
        if match.group("literal_tag") or match.group("placeholder") or match.group("empty"):
            built.literal(match.group(0))
        elif match.group("escape"):
            built.literal(match.group(0), spaced=match.group(0) in ("\\n", "\\t"))  # a line break is a word
        elif match.group("quote"):
            built.add(match.group(0)[1])
        elif match.group("entity"):
            built.add(html.unescape(match.group(0)))
        elif match.group("close"):
            built.close(match.group(0), match.group("name"))
        else:
            built.open(match.group(0), match.group("name"))
    built.add(body[position:])
    return built.segment(escape=True)


def _android_escape(rendered: str) -> str:
    """Quotes and apostrophes in the text (not in tags) escaped as Android reads them; a leading ``@`` or ``?``
    too (else it is read as a reference)."""
    parts = re.split(r"(<[^>]*>)", rendered)
    out = "".join(p if p.startswith("<") else _QUOTES_OUT.sub(r"\\\1", p) for p in parts)
    out = re.sub(r" *(\\[nt]) *", r"\1", out)  # the spaces that made a line break a word of its own
    return "\\" + out if out[:1] in ("@", "?") else out


def read_android(data: bytes) -> Resource:
    from lxml import etree

    parser = xml_parser()
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as err:
        raise ResourceError(f"not XML: {err}") from None
    if root.tag != "resources":
        raise ResourceError(f"not an Android string resource (the root is <{root.tag}>, not <resources>)")
    found: list[tuple[Any, Segment]] = []
    for element in root:
        if not isinstance(element.tag, str) or element.get("translatable") == "false":
            continue
        targets = [element] if element.tag == "string" else []
        if element.tag in ("string-array", "plurals"):
            targets = [item for item in element if item.tag == "item"]
        for target in targets:
            inner = (target.text or "") + "".join(
                etree.tostring(child, encoding="unicode", with_tail=True) for child in target
            )
            if inner.strip().startswith("@") or _ICU.search(inner):  # a reference to another resource
                continue
            segment = _android_segment(inner)
            if has_words(segment.text):
                found.append((target, segment))
    namespaces = " ".join(f'xmlns:{k}="{v}"' for k, v in root.nsmap.items() if k)

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        for (target, segment), (translated, links) in zip(found, done, strict=True):
            content = _android_escape(render(segment, translated, links))
            fresh = etree.fromstring(f"<string {namespaces}>{content}</string>", parser)
            for child in list(target):
                target.remove(child)
            target.text = fresh.text
            target.extend(list(fresh))
        etree.cleanup_namespaces(root)
        info = root.getroottree().docinfo
        return bytes(etree.tostring(root, xml_declaration=True, encoding=info.encoding or "utf-8")) + b"\n"

    return Resource([s for _, s in found], rebuild)


# --- Apple .strings ---

_STRINGS_ENTRY = re.compile(r'("(?:[^"\\]|\\.)*"\s*=\s*")((?:[^"\\]|\\.)*)("\s*;)')
_STRINGS_ESCAPES = {"\\n": "\n", "\\t": "\t", '\\"': '"', "\\\\": "\\", "\\r": "\r"}


def read_apple_strings(data: bytes) -> Resource:
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        raise ResourceError(f"neither UTF-8 nor UTF-16 (byte {err.start})") from None
    entries = list(_STRINGS_ENTRY.finditer(_without_comments(text)))
    if not entries and text.strip():
        raise ResourceError('no "key" = "value"; entry')
    found: list[tuple[re.Match[str], Protected]] = []
    for match in entries:
        value = re.sub(r'\\[ntr"\\]', lambda m: _STRINGS_ESCAPES[m.group(0)], match.group(2))
        protected = _protected(value)
        if protected is not None:
            found.append((match, protected))

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        out, position = [], 0
        for (match, protected), (translated, _) in zip(found, done, strict=True):
            value = restore(protected, translated)
            escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
            out += [text[position : match.start(2)], escaped]
            position = match.end(2)
        out.append(text[position:])
        written = "".join(out)
        return written.encode("utf-16") if encoding == "utf-16" else written.encode("utf-8")

    return Resource([p.segment for _, p in found], rebuild)


def _without_comments(text: str) -> str:
    """``text`` with its comments blanked out, same length (so that positions stay the text's); quoted strings
    are read whole, so that a ``//`` inside one is no comment."""

    def blank(match: re.Match[str]) -> str:
        found = match.group(0)
        return found if found.startswith('"') else re.sub(r"[^\n]", " ", found)

    return re.sub(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/|//[^\n]*', blank, text, flags=re.S)


# --- Java .properties ---

_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(data: bytes) -> Resource:
    encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        encoding = "latin-1"  # the format's own encoding before Java 9
        text = data.decode(encoding)
    lines = text.splitlines(keepends=True)
    parts: list[str | int] = []
    found: list[tuple[str, Protected]] = []  # (key as written with its separator, the value)
    index = 0
    while index < len(lines):
        start = index
        logical = lines[index].rstrip("\r\n")
        while _continues(logical) and index + 1 < len(lines):
            index += 1
            logical = logical[:-1] + lines[index].rstrip("\r\n").lstrip()
        index += 1
        stripped = logical.lstrip()
        match = re.match(r"((?:[^\s:=\\]|\\.)+)(\s*[:=]\s*|\s+)", stripped)
        if not stripped or stripped[0] in "#!" or match is None:
            parts.append("".join(lines[start:index]))
            continue
        value = _unescape_property(stripped[match.end() :])
        protected = _protected(value, accelerators=False)
        if protected is None:
            parts.append("".join(lines[start:index]))
            continue
        newline = lines[index - 1][len(lines[index - 1].rstrip("\r\n")) :]
        key = logical[: len(logical) - len(stripped)] + stripped[: match.end()]
        found.append((key, protected))
        parts.append(len(found) - 1)
        parts.append(newline)

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        values = [restore(p, translated) for (_, p), (translated, _) in zip(found, done, strict=True)]
        out = [p if isinstance(p, str) else found[p][0] + _escape_property(values[p]) for p in parts]
        return "".join(out).encode(encoding)  # translated values are ASCII (\uXXXX escapes)

    return Resource([p.segment for _, p in found], rebuild)


def _continues(line: str) -> bool:
    """Whether a line ends in an odd number of backslashes (the value goes on)."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape_property(value: str) -> str:
    def one(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if len(escaped) == 5:  # \uXXXX (a lone "\u" is read as "u", as other unknown escapes are)
            return chr(int(escaped[1:], 16))
        return _PROPERTY_ESCAPES.get(escaped, escaped)

    joined = re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, value)
    return joined.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # \uD83D\uDE00: one character


def _escape_property(value: str) -> str:
    out = []
    for position, char in enumerate(value):
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif char == " " and position == 0:
            out.append("\\ ")
        elif ord(char) > 0x7E:
            out.append("".join(f"\\u{unit:04x}" for unit in _utf16(char)))
        else:
            out.append(char)
    return "".join(out)


def _utf16(char: str) -> list[int]:
    encoded = char.encode("utf-16-be")
    return [int.from_bytes(encoded[i : i + 2], "big") for i in range(0, len(encoded), 2)]
