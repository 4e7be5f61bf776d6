"""Subtitles (core/subtitles.py): SubRip and WebVTT cues translated, timing and layout kept.

Outputs are read back with independent parsers (the ``srt`` and ``webvtt-py`` packages). The "translation"
reverses the words, so that a tag which follows the alignment moves.
"""

from __future__ import annotations

import io

import pytest

from core.documents import read_document
from core.subtitles import LINE, _break

srt = pytest.importorskip("srt")
webvtt = pytest.importorskip("webvtt")

SUBRIP = """1
00:00:01,000 --> 00:00:04,000
Hello there, my <i>old</i> friend.
How are you doing today?

2
00:00:05,000 --> 00:00:06,500
{\\an8}Look up!

3
00:00:07,000 --> 00:00:08,000
1984

4
00:00:09,000 --> 00:00:10,000
<font color="#ffff00">Run</font> now
"""

WEBVTT = """WEBVTT

NOTE a comment, never translated

intro
00:01.000 --> 00:04.000 position:10% align:start
<v Roger Bingham>We are in New York City &amp; it's <c.yellow>cold</c></v>

00:05.000 --> 00:07.000
<i>Tom</i> &lt;3 Jerry
"""


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(reversed(words)).upper(), [(i, len(words) - 1 - i) for i in range(len(words))]


def translate(name: str, text: str) -> str:
    document = read_document(name, text.encode())
    return document.rebuild([reverse(s.text) for s in document.segments]).decode()


def test_subrip_cues_are_sentences_across_their_lines_and_keep_their_timing() -> None:
    assert [s.text for s in read_document("a.srt", SUBRIP.encode()).segments] == [
        "Hello there, my old friend. How are you doing today?",
        "Look up!",
        "Run now",
    ]
    out = translate("a.srt", SUBRIP)
    source, cues = list(srt.parse(SUBRIP)), list(srt.parse(out))
    assert [(c.index, c.start, c.end) for c in cues] == [(c.index, c.start, c.end) for c in source]
    # two lines stay two lines (the text is longer than a line), broken near the middle
    first = cues[0].content.split("\n")
    assert len(first) == 2 and " ".join(first) == "TODAY? DOING YOU ARE HOW FRIEND. <i>OLD</i> MY THERE, HELLO"
    assert abs(len(first[0]) - len(first[1])) < 15
    assert cues[1].content == "{\\an8}UP! LOOK"  # the position override stays first
    assert cues[2].content == "1984"  # nothing to translate
    assert cues[3].content == 'NOW <font color="#ffff00">RUN</font>'


def test_webvtt_keeps_its_header_notes_identifiers_settings_voices_and_escapes() -> None:
    assert [s.text for s in read_document("a.vtt", WEBVTT.encode()).segments] == [
        "We are in New York City & it's cold",
        "Tom <3 Jerry",
    ]
    out = translate("a.vtt", WEBVTT)
    assert out.startswith("WEBVTT\n\nNOTE a comment, never translated\n\nintro\n00:01.000 --> 00:04.000 position:10%")
    captions = webvtt.from_buffer(io.StringIO(out))
    assert [(c.start, c.end) for c in captions] == [("00:00:01.000", "00:00:04.000"), ("00:00:05.000", "00:00:07.000")]
    assert captions[0].raw_text == "<v Roger Bingham><c.yellow>COLD</c> IT'S &amp; CITY YORK NEW IN ARE WE</v>"
    assert captions[0].voice == "Roger Bingham"
    assert captions[1].raw_text == "JERRY &lt;3 <i>TOM</i>"


def test_a_long_line_breaks_at_the_space_nearest_its_middle_outside_tags() -> None:
    assert _break("short one") == ["short one"]
    text = "one two three four five <i>six seven eight</i> nine ten eleven"
    assert len(text) > LINE
    top, bottom = _break(text)
    assert f"{top} {bottom}" == text and "<i>" in top + bottom and abs(len(top) - len(bottom)) <= 12
    assert all(part.count("<") == part.count(">") for part in (top, bottom))
    # the end of a sentence or a comma near the middle is where a line ends
    assert _break("Where did you put them? I need the keys right now, please.") == [
        "Where did you put them?",
        "I need the keys right now, please.",
    ]
    assert _break("Thank you very much for your help, I will be back in ten minutes.")[0].endswith("help,")


def test_crlf_files_stay_crlf() -> None:
    out = translate("a.srt", SUBRIP.replace("\n", "\r\n"))
    assert "\r\n" in out and "\n" not in out.replace("\r\n", "")
