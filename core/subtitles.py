"""Subtitles: SubRip (.srt) and WebVTT (.vtt) files, each cue's text translated, its timing and layout kept.

A cue is a timing line (``00:00:01,000 --> 00:00:04,000``, WebVTT's settings after it included) and the text
lines under it, up to a blank line. The text lines are one segment, read across their line breaks (a sentence
often runs over both lines); everything else (numbers, cue identifiers, WebVTT's header,
``NOTE``, ``STYLE`` and ``REGION`` blocks) is copied as it is. Inline tags (``<i>``, ``<b>``, ``<u>``,
``<font color=...>``, WebVTT's ``<c.class>`` and ``<lang xx>``) are spans that go back on the aligned words; a
leading voice tag (``<v Roger>``) or SubRip position override (``{\\an8}``) stays at the start of the cue; a
timestamp inside a cue is a placeholder. A translation of a cue that had several lines is broken again into two
lines when it is longer than ``LINE`` characters (the common broadcast limit): at the space nearest its middle, one
after a sentence's end or a comma preferred.
WebVTT's ``&amp;``, ``&lt;`` and ``&gt;`` are read as the characters and written back escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass

from core.inline import TaggedText
from core.markup import Links, Segment, render
from core.strings import has_words

LINE = 42
"""Characters per subtitle line past which a translated cue of several lines is broken in two."""
_TIMING = re.compile(r"^\s*(?:\d+:)?\d{1,2}:\d{2}[,.]\d{1,3}\s+-->\s+(?:\d+:)?\d{1,2}:\d{2}[,.]\d{1,3}")
_TAG = re.compile(r"<(/)?([A-Za-z][\w.-]*)(?:[ \t][^>]*)?>|<\d[\d:.]*>|\{\\[^}]*\}")
_LEAD = re.compile(r"^(?:\s*(?:<v(?:\.[\w.-]+)?[ \t][^>]*>|\{\\[^}]*\}))+")


@dataclass
class Subtitles:
    segments: list[Segment]
    rebuild: Callable[[list[tuple[str, Links]]], bytes]


@dataclass
class _Cue:
    lead: str
    """A voice tag or position override kept before the text."""
    trail: str
    """Its closing ``</v>`` kept after it."""
    lines: int
    newline: str


def read_subtitles(text: str, webvtt: bool) -> Subtitles:
    lines = text.splitlines(keepends=True)
    parts: list[str | int] = []
    segments: list[Segment] = []
    cues: list[_Cue] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        parts.append(line)
        index += 1
        if not _TIMING.match(line):
            continue
        body: list[str] = []
        while index < len(lines) and lines[index].strip():
            body.append(lines[index])
            index += 1
        if not body:
            continue
        newline = body[-1][len(body[-1].rstrip("\r\n")) :] or "\n"
        joined = " ".join(b.strip() for b in body)
        lead_match = _LEAD.match(joined)
        lead = lead_match.group(0) if lead_match else ""
        rest = joined[len(lead) :].strip()
        trail = ""
        if lead.lstrip().startswith("<v") and rest.endswith("</v>"):
            rest, trail = rest[: -len("</v>")].rstrip(), "</v>"
        segment = _segment(rest, webvtt)
        if not has_words(segment.text):  # nothing to translate: copied as it is
            parts.extend(body)
            continue
        segments.append(segment)
        cues.append(_Cue(lead, trail, len(body), newline))
        parts.append(len(segments) - 1)

    def rebuild(done: list[tuple[str, Links]]) -> bytes:
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            cue, (translated, links) = cues[part], done[part]
            rendered = render(segments[part], translated, links)
            broken = _break(rendered) if cue.lines > 1 else [rendered]
            text = cue.newline.join(broken)
            out.append(cue.lead + text + cue.trail + cue.newline)
        return "".join(out).encode("utf-8")

    return Subtitles(segments, rebuild)


def _segment(text: str, webvtt: bool) -> Segment:
    """A cue's text without its tags, each tag pair a span over the words it enclosed."""
    built = TaggedText()
    position = 0
    for match in _TAG.finditer(text):
        between = text[position : match.start()]
        built.add(html.unescape(between) if webvtt else between)
        position = match.end()
        closing, name = match.group(1), match.group(2)
        if name is None:  # a timestamp or an override in the middle: a literal the model copies
            built.literal(match.group(0))
        elif closing:
            built.close(match.group(0), name.split(".", 1)[0].lower())
        else:
            built.open(match.group(0), name.split(".", 1)[0].lower())
    rest = text[position:]
    built.add(html.unescape(rest) if webvtt else rest)
    return built.segment(escape=webvtt)


def _break(text: str) -> list[str]:
    """``text`` in two lines when it is longer than LINE: at the space nearest its middle (outside tags), a space
    after the end of a sentence or a comma counting as nearer (a line ending a clause reads better)."""
    visible = _TAG.sub("", text)
    if len(visible) <= LINE:
        return [text]
    spaces: list[tuple[float, int]] = []
    depth, seen, last = 0, 0, ""
    for at, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif not depth:
            if char == " ":
                bonus = LINE / 3 if last in ".?!" and last else LINE / 6 if last in ",;:" and last else 0
                spaces.append((abs(seen - len(visible) / 2) - bonus, at))
            seen += 1
            last = char
    if not spaces:
        return [text]
    _, at = min(spaces)
    return [text[:at], text[at + 1 :]]
