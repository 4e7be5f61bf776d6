"""Markdown in, Markdown out, the same way as HTML (core/markup.py): segments of text with their inline markup as
spans, put back around the aligned target words by ``core.markup.render``.

Blocks: headings, list items and block quotes keep their prefix (``## ``, ``- ``, ``1. ``, ``> ``) and translate
the rest; a paragraph's lines become one segment (the output paragraph is one line); fenced and indented code,
HTML blocks, front matter, table separator rows and reference definitions are copied as they are; table rows
translate cell by cell. Inline: ``*em*``, ``_em_``, ``**strong**``, ``__strong__``, ``~~del~~`` and links
``[text](target)`` are spans (the link target never changes); code spans, images, autolinks and bare URLs are
literals, copied byte for byte.
"""

from __future__ import annotations

import re

from core.markup import MAX_DEPTH, Document, MarkupError, Segment, Span

_FENCE = re.compile(r"^ {0,3}(```+|~~~+)")
_PREFIX = re.compile(r"^( {0,3}#{1,6}[ \t]+| *(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?| {0,3}(?:>[ \t]?)+)")
_VERBATIM = re.compile(r"^( {4,}|\t| {0,3}<[A-Za-z/!?]| {0,3}\[[^\]]+\]:\s| *\|? *:?-{3,}| {0,3}([-*_])( *\2){2,} *$)")
_URL = re.compile(r"https?://[^\s<>()\[\]]+[^\s<>()\[\].,;:!?'\"]")
_LINK_TARGET = re.compile(r"\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")


def parse_markdown(text: str) -> Document:
    parts: list[str | int] = []
    segments: list[Segment] = []

    def segment(body: str) -> None:
        if not body.strip():
            parts.append(body)
            return
        lead = body[: len(body) - len(body.lstrip())]
        trail = body[len(body.rstrip()) :]
        if lead:
            parts.append(lead)
        segments.append(_inline(body.strip()))
        parts.append(len(segments) - 1)
        if trail:
            parts.append(trail)

    lines = text.splitlines(keepends=True)
    i = 0
    if lines and lines[0].strip() == "---":  # front matter
        end = next((j for j in range(1, len(lines)) if lines[j].strip() in ("---", "...")), None)
        if end is not None:
            parts.append("".join(lines[: end + 1]))
            i = end + 1
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            newline = paragraph[-1][len(paragraph[-1].rstrip("\r\n")) :]
            segment(" ".join(line.strip() for line in paragraph))
            parts.append(newline)
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        body, newline = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        fence = _FENCE.match(body)
        if fence:
            flush()
            mark = fence.group(1)
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(mark[0] * len(mark))),
                len(lines) - 1,
            )
            parts.append("".join(lines[i : end + 1]))
            i = end + 1
            continue
        if not body.strip():
            flush()
            parts.append(line)
        elif _VERBATIM.match(body) and not (paragraph and body.startswith(" ")):
            flush()
            parts.append(line)
        elif body.lstrip().startswith("|"):
            flush()
            for k, cell in enumerate(re.split(r"(?<!\\)\|", body)):
                if k:
                    parts.append("|")
                segment(cell)
            parts.append(newline)
        elif (prefix := _PREFIX.match(body)) is not None:
            flush()
            parts.append(prefix.group(0))
            segment(body[prefix.end() :])
            parts.append(newline)
        else:
            paragraph.append(line)
        i += 1
    flush()
    return Document(parts, segments)


def _inline(source: str) -> Segment:
    """One block's text: spans for emphasis and links, literals for code, images and URLs."""
    out: list[str] = []
    spans: list[Span] = []
    literals: dict[str, str] = {}
    length = 0

    def literal(markup: str) -> None:
        nonlocal length
        key = "{" + str(len(literals) + 1) + "}"
        literals[key] = markup
        out.append(key)
        length += len(key)

    def walk(s: str, depth: int) -> None:
        nonlocal length
        if depth > MAX_DEPTH:
            raise MarkupError(f"the markup nests more than {MAX_DEPTH} elements deep")
        i = 0
        while i < len(s):
            c = s[i]
            if c == "\\" and i + 1 < len(s):
                out.append(s[i : i + 2])
                length += 2
                i += 2
                continue
            if c == "`":
                run = len(s[i:]) - len(s[i:].lstrip("`"))
                end = s.find("`" * run, i + run)
                if end != -1:
                    literal(s[i : end + run])
                    i = end + run
                    continue
            if s.startswith("![", i) or (c == "[" and s.startswith("](", _bracket_end(s, i))):
                close = _bracket_end(s, i + (c == "!"))
                target = _LINK_TARGET.match(s, close + 1) if close != -1 else None
                if target is not None:
                    if c == "!":
                        literal(s[i : target.end()])
                    else:
                        span = Span(length, length, "[", "a", depth, end_tag="]" + target.group(0))
                        spans.append(span)
                        walk(s[i + 1 : close], depth + 1)
                        span.end = length
                    i = target.end()
                    continue
            if c == "<" and (m := re.match(r"<(?:https?://|mailto:)[^>\s]+>", s[i:])):
                literal(m.group(0))
                i += m.end()
                continue
            if c in "hH" and (m := _URL.match(s, i)) and (i == 0 or not s[i - 1].isalnum()):
                literal(m.group(0))
                i = m.end()
                continue
            for mark in ("**", "__", "~~", "*", "_"):
                if s.startswith(mark, i) and _opens(s, i, mark):
                    end = _closer(s, i + len(mark), mark)
                    if end != -1:
                        span = Span(length, length, mark, "em", depth, end_tag=mark)
                        spans.append(span)
                        walk(s[i + len(mark) : end], depth + 1)
                        span.end = length
                        i = end + len(mark)
                        break
            else:
                out.append(c)
                length += 1
                i += 1

    walk(source, 0)
    spans = [s for s in spans if s.end > s.start]
    return Segment("".join(out), sorted(spans, key=lambda s: (s.start, -s.end, s.depth)), literals, escape=False)


def _bracket_end(s: str, i: int) -> int:
    """Index of the ``]`` matching the ``[`` at ``i`` (nested brackets counted), or -1."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "\\":
            continue
        if s[j] == "[":
            depth += 1
        elif s[j] == "]":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _opens(s: str, i: int, mark: str) -> bool:
    """A delimiter opens when followed by a non-space (and, for ``_``, not inside a word)."""
    after = s[i + len(mark) : i + len(mark) + 1]
    if not after or after.isspace() or after == mark[0]:
        return False
    return not (mark[0] == "_" and i > 0 and s[i - 1].isalnum())


def _closer(s: str, start: int, mark: str) -> int:
    j = start
    while (j := s.find(mark, j)) != -1:
        before, after = s[j - 1 : j], s[j + len(mark) : j + len(mark) + 1]
        if before and not before.isspace() and after != mark[0] and not (mark[0] == "_" and after.isalnum()):
            return j
        j += 1
    return -1
