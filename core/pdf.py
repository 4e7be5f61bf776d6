"""PDF files translated in place: each page's text taken out and its translation written back where the text was.

A PDF has no paragraphs, only strings drawn at positions. The text of each page is read with its positions, sizes,
widths and fonts (pypdf's text extraction, which decodes every kind of font it maps to Unicode); strings on one
baseline make a line, split where a wide gap separates them (table cells, columns), and dot leaders with their page
number are kept apart; consecutive lines of one size and style, close below each other and starting near the same
left edge make a block, a paragraph, which is what gets translated, and a line that opens a list item or a
numbered entry starts one; a paragraph that runs over a page's end is translated whole and its translation shared
out between its two halves. Then every text-drawing operator is taken out of the page (and of the forms it draws),
everything else is kept as it is (pictures, lines, fills, links, the page's size and rotation), and each block's
translation is drawn in its place: from the first line's baseline, at the block's size, wrapped to its width,
centred where a lone line was centred on the page (set against its right edge where it was), in Helvetica (bold or
italic where most of the block was), made smaller, down to 70 %, where it would reach the text right of it or below
it. Blocks without a letter (page numbers,
figures, leaders) and turned text are drawn again as they were. Each is drawn in the fill colour its text had.

What this gives up: the document's own fonts (the translation needs letters a subset font may not have; the 14
standard fonts have every Western European one, so characters outside Windows-1252 come out as "?"), a line's
mixed styles and colours (a paragraph takes most of its first line's fill colour, in a device colour space, else
black),
and text drawn as pictures (scans, outlined type), which stays untranslated. A
PDF with no text at all comes back unchanged.
"""

from __future__ import annotations

import io
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.markup import Links, Segment

T = TypeVar("T")
MEDIA_TYPE = "application/pdf"
FONTS = {
    (False, False): "/Helvetica",
    (True, False): "/Helvetica-Bold",
    (False, True): "/Helvetica-Oblique",
    (True, True): "/Helvetica-BoldOblique",
}
"""The standard font drawn for a block, by (bold, italic) of the block's own."""
SHOW_TEXT = {b"Tj", b"TJ", b"'", b'"'}
"""The operators that draw text: taken out of the pages."""
SMALLEST = 0.7
"""A translation that does not fit its block is drawn smaller, down to this share of the block's size."""
LETTER = re.compile(r"[^\W\d_]")
logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # a damaged file is refused or read once, not logged per object
BULLET = re.compile(r"^(?:[•◦▪‣∙·*\u2013\u2014-]|\(?\d{1,3}[.)]|\d{1,3}(?:\.\d{1,3})+\.?|\(?[a-z][.)])\s")
"""A line that starts a list item or a numbered heading (a table of contents' entries) starts a block of its own."""
LEADERS = re.compile(r"^\s*(?:[.·…_]\s*){3,}\S*\s*$")
"""The end of a line that is dot leaders and maybe a page number: drawn again as it was, not translated."""
NARROW = 0.8
"""A text face's width against Helvetica's, at least, for telling a gap between two strings of a line."""


class PdfError(ValueError):
    """The file is not a PDF this module can read (damaged, or encrypted with a password)."""


@dataclass
class _Run:
    """One string as drawn: its text, where its baseline starts, its size in page units, its font's style."""

    text: str
    x: float
    y: float
    size: float
    bold: bool
    italic: bool
    direction: tuple[float, float] = (1.0, 0.0)
    width: float | None = None
    """As its own font draws it, where the font's widths could be read; else estimated in Helvetica."""
    colour: tuple[bytes, tuple[float, ...]] = (b"g", (0.0,))
    """The fill colour it was drawn in, as the operator that sets it (g, rg or k) and its operands."""

    @property
    def end(self) -> float:
        width = self.width if self.width is not None else text_width(self.text, self.size, self.bold, self.italic)
        return self.x + width

    @property
    def upright(self) -> bool:
        return abs(self.direction[1]) < 1e-3 and self.direction[0] > 0


@dataclass
class _Line:
    runs: list[_Run]

    @property
    def x0(self) -> float:
        return self.runs[0].x

    @property
    def x1(self) -> float:
        return max(run.end for run in self.runs)

    @property
    def y(self) -> float:
        return self.runs[0].y

    @property
    def size(self) -> float:
        return max(run.size for run in self.runs)

    @property
    def style(self) -> tuple[bool, bool]:
        """(bold, italic) of most of the line's characters."""
        return _most(((run.bold, run.italic), len(run.text.strip())) for run in self.runs)

    @property
    def colour(self) -> tuple[bytes, tuple[float, ...]]:
        """The fill colour of most of the line's characters."""
        return _most((run.colour, len(run.text.strip())) for run in self.runs)

    @property
    def text(self) -> str:
        out = self.runs[0].text
        for before, run in zip(self.runs, self.runs[1:], strict=False):
            gap = run.x - before.end
            joined = out.endswith(" ") or run.text.startswith(" ")
            out += ("" if joined or gap < 0.15 * run.size else " ") + run.text
        return " ".join(out.split())


@dataclass
class _Block:
    """A paragraph: lines drawn one below the other, and what replaces them."""

    page: int
    lines: list[_Line]
    first: _Run = field(init=False)
    room: float = 0.0
    """How far right a one-line block's translation may run: the next text on its baseline, else the page's edge
    less the page's left margin."""
    floor: float = 0.0
    """How far down its translation may run: the top of the next text below it, else the page's bottom margin."""
    centre: float | None = None
    """Where a one-line block centred on the page is centred (its translation is too); None for the others."""
    flush_right: float | None = None
    """Where a one-line block set against the page's right text edge ends (its translation does too, growing to the
    left as far as the nearest text on its baseline or the left margin); None for the others."""

    def __post_init__(self) -> None:
        self.first = self.lines[0].runs[0]

    @property
    def text(self) -> str:
        return _joined([line.text for line in self.lines])

    @property
    def size(self) -> float:
        return sorted(line.size for line in self.lines)[len(self.lines) // 2]

    @property
    def style(self) -> tuple[bool, bool]:
        """(bold, italic) of most of its characters: a paragraph that opens with a bold word stays regular."""
        return _most((line.style, len(line.text)) for line in self.lines)

    @property
    def leading(self) -> float:
        if len(self.lines) < 2:
            return 1.2 * self.size
        gaps = sorted(a.y - b.y for a, b in zip(self.lines, self.lines[1:], strict=False))
        return gaps[len(gaps) // 2]

    @property
    def width(self) -> float:
        return max(line.x1 for line in self.lines) - self.x0

    @property
    def x0(self) -> float:
        return min(line.x0 for line in self.lines)

    def takes(self, line: _Line) -> bool:
        """Whether ``line`` continues this paragraph: the same size and style, just below, near the same left."""
        last, run = self.lines[-1], line.runs[0]
        size = self.size
        first = self.lines[0]
        if not run.upright or not self.first.upright or (line.style, line.colour) != (first.style, first.colour):
            return False
        if abs(line.size - size) > 0.15 * size:
            return False
        drop = last.y - line.y
        if not 0.5 * size < drop < 1.9 * size:
            return False
        if len(self.lines) >= 2 and abs(drop - self.leading) > 0.25 * size:
            return False
        if BULLET.match(line.text):
            return False
        if BULLET.match(self.lines[0].text) and line.x0 < self.x0 + 0.3 * size:
            return False  # a list item's lines are indented past its bullet: back at the bullet, a new paragraph
        return abs(line.x0 - self.x0) < 2.5 * size or (len(self.lines) == 1 and 0 < self.x0 - line.x0 < 4 * size)


def _most(weighted: Iterable[tuple[T, int]]) -> T:
    """The value with the largest total weight (the first of those tied)."""
    totals: dict[T, int] = {}
    for value, weight in weighted:
        totals[value] = totals.get(value, 0) + weight
    return max(totals, key=lambda value: totals[value])


def text_width(text: str, size: float, bold: bool = False, italic: bool = False) -> float:
    """``text``'s width at ``size`` in the standard font drawn for the style (Adobe's metrics, which pypdf carries);
    a character the font lacks counts as wide as an "n"."""
    widths = _widths(FONTS[bold, italic])
    default = widths.get("n", 556)
    return sum(widths.get(ch, default) for ch in text) * size / 1000


_WIDTHS: dict[str, dict[str, float]] = {}


def _widths(font: str) -> dict[str, float]:
    found = _WIDTHS.get(font)
    if found is None:
        from pypdf._codecs.core_font_metrics import CORE_FONT_METRICS

        found = _WIDTHS[font] = {k: float(v) for k, v in CORE_FONT_METRICS[font[1:]].character_widths.items()}
    return found


def _style(font: Any) -> tuple[bool, bool]:
    name = str(font.get("/BaseFont", "")) if font is not None else ""
    descriptor = font.get("/FontDescriptor") if font is not None else None
    flags = int(descriptor.get_object().get("/Flags", 0)) if descriptor is not None else 0
    weight = float(descriptor.get_object().get("/FontWeight", 400)) if descriptor is not None else 400
    bold = bool(re.search(r"bold|black|heavy|semibold|demi", name, re.I)) or weight >= 600 or bool(flags & (1 << 18))
    italic = bool(re.search(r"italic|oblique", name, re.I)) or bool(flags & (1 << 6))
    return bold, italic


def _measure(font: Any, fonts: dict[int, Any]) -> Callable[[str], float] | None:
    """The widths of ``font`` (a font resource) as a function of a string, in thousandths of the size; None where
    they cannot be read. (pypdf's own font model, which its layout extraction uses.)"""
    if font is None:
        return None
    key = id(font)
    if key not in fonts:
        try:
            from pypdf.generic._font import Font

            fonts[key] = Font.from_font_resource(font).get_text_width
        except Exception:  # noqa: BLE001 - any font pypdf cannot model: estimated instead
            fonts[key] = None
    measure: Callable[[str], float] | None = fonts[key]
    return measure


COLOUR_OPERATORS = {b"g": 1, b"rg": 3, b"k": 4}
"""The fill colour operators of the device colour spaces, and their operand counts."""
BY_OPERANDS = {count: name for name, count in COLOUR_OPERATORS.items()}
"""``sc``/``scn`` in a device colour space: the operator of the same operand count."""


def _runs(page: Any, fonts: dict[int, Any]) -> list[_Run]:
    """The page's strings as drawn; ``fonts`` holds each font's widths as modelled (``_measure``), for the whole
    document."""
    runs: list[_Run] = []
    black: tuple[bytes, tuple[float, ...]] = (b"g", (0.0,))
    colours = [black]  # the fill colour of each graphics state saved (q) and the current one, last
    shown: list[tuple[bytes, tuple[float, ...]]] = []  # the colour of the first string drawn since the last run

    def operator(op: bytes, args: list[Any], cm: list[float], tm: list[float]) -> None:
        if op == b"q":
            colours.append(colours[-1])
        elif op == b"Q" and len(colours) > 1:
            colours.pop()
        elif op in COLOUR_OPERATORS or op in (b"sc", b"scn"):
            values = tuple(float(v) for v in args if isinstance(v, (int, float)))
            kind = op if op in COLOUR_OPERATORS else BY_OPERANDS.get(len(values))
            if kind is not None and len(values) == COLOUR_OPERATORS[kind]:
                colours[-1] = (kind, values)
        elif op in SHOW_TEXT and not shown:
            shown.append(colours[-1])  # pypdf hands a string over later, maybe after another colour was set

    def visit(text: str, cm: list[float], tm: list[float], font: Any, size: float) -> None:
        if not text.strip():
            if text and runs and not runs[-1].text.endswith(" "):
                runs[-1].text += " "  # a space pypdf read between two strings
            return
        colour = shown[0] if shown else colours[-1]
        shown.clear()
        a, b = tm[0] * cm[0] + tm[1] * cm[2], tm[0] * cm[1] + tm[1] * cm[3]
        c, d = tm[2] * cm[0] + tm[3] * cm[2], tm[2] * cm[1] + tm[3] * cm[3]
        x, y = tm[4] * cm[0] + tm[5] * cm[2] + cm[4], tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        scale = math.hypot(c, d) or 1.0
        length = math.hypot(a, b) or 1.0
        bold, italic = _style(font)
        measure = _measure(font, fonts)
        for piece in text.split("\n"):
            if piece.strip():
                width = None
                if measure is not None:
                    try:
                        width = measure(piece.strip()) * size * length / 1000  # pypdf pads with spaces
                    except Exception:  # noqa: BLE001 - a width pypdf cannot tell: estimated instead
                        width = None
                runs.append(_Run(piece, x, y, size * scale, bold, italic, (a / length, b / length), width, colour))
                y -= 1.2 * size * scale  # text after a break pypdf joined: the next line down

    page.extract_text(visitor_operand_before=operator, visitor_text=visit)
    return runs


def _lines(runs: list[_Run]) -> list[_Line]:
    """Runs on one baseline in drawing order make a line; a gap wider than three spaces' worth starts another (a
    table's next cell, the next column)."""
    lines: list[_Line] = []
    for run in runs:
        line = lines[-1] if lines else None
        if line is not None and run.upright and line.runs[-1].upright:
            last = line.runs[-1]
            same_baseline = abs(run.y - last.y) < 0.3 * max(run.size, last.size)
            # a run whose width could not be read is estimated in Helvetica, wider than most faces: a narrower guess
            gap = run.x - last.x - (last.end - last.x) * (1.0 if last.width is not None else NARROW)
            if same_baseline and run.x > last.x and gap < 1.5 * max(run.size, last.size):
                line.runs.append(run)
                continue
        lines.append(_Line([run]))
    return [part for line in lines for part in _leaders_apart(line)]


def _leaders_apart(line: _Line) -> list[_Line]:
    """A line ending in dot leaders (and a page number) as two: the text, and the leaders drawn again as they were."""
    for cut in range(1, len(line.runs)):
        rest = "".join(run.text for run in line.runs[cut:])
        if LEADERS.match(rest) and LETTER.search("".join(run.text for run in line.runs[:cut])):
            return [_Line(line.runs[:cut]), _Line(line.runs[cut:])]
    return [line]


def _blocks(page_number: int, lines: list[_Line]) -> list[_Block]:
    blocks: list[_Block] = []
    for line in lines:
        if blocks and blocks[-1].takes(line):
            blocks[-1].lines.append(line)
        else:
            blocks.append(_Block(page_number, [line]))
    return blocks


SENTENCE_END = re.compile(r"[.!?:;…][\"'”’»)\]]*$")


UNDRAWABLE_SHARE = 0.02
"""A translation whose letters the standard fonts lack more often than this is refused, not drawn as "?"s."""


def _check_drawable(texts: Iterable[str]) -> None:
    """PdfError when the translations are in a script the standard fonts cannot draw (a model into Russian or
    Greek, say): the PDF would come back as question marks. A stray symbol among Latin letters is drawn as "?"."""
    letters = lacking = 0
    for text in texts:
        for ch in text:
            if ch.isalpha():
                letters += 1
                try:
                    ch.encode("cp1252")
                except UnicodeEncodeError:
                    lacking += 1
    if letters and lacking > UNDRAWABLE_SHARE * letters:
        raise PdfError(
            f"{lacking} of the translation's {letters} letters are not in Windows-1252, which is all the PDF's "
            "standard fonts can draw: translate this language's PDFs as text, or another kind of file"
        )


def _across_pages(blocks: list[_Block], translated: list[int]) -> list[list[int]]:
    """The translated blocks as segments: each alone, but for a paragraph that runs over a page's end, whose two
    halves are one segment (translated whole, then shared out). A page's last block of body text (its most common
    size) that does not end a sentence continues in the next page's first block of the same size, style and left
    edge, if that one starts in lower case."""
    by_page: dict[int, list[int]] = {}
    for i in translated:
        by_page.setdefault(blocks[i].page, []).append(i)
    follows: dict[int, int] = {}
    for page, indices in by_page.items():
        sizes = [round(blocks[i].size, 1) for i in indices]
        body = max(set(sizes), key=sizes.count)
        last = next((i for i in reversed(indices) if round(blocks[i].size, 1) == body), None)
        if last is None or SENTENCE_END.search(blocks[last].text):
            continue
        block = blocks[last]
        for j in by_page.get(page + 1, []):
            other = blocks[j]
            if round(other.size, 1) == body and other.style == block.style and abs(other.x0 - block.x0) < 0.5 * body:
                if other.text[:1].islower():
                    follows[last] = j
                break
    continued = set(follows.values())
    return [[i, follows[i]] if i in follows else [i] for i in translated if i not in continued]


def _joined(texts: list[str]) -> str:
    """Lines (or a paragraph's halves either side of a page break) as one text, a word broken at a line's end joined
    again."""
    out = texts[0]
    for text in texts[1:]:
        if out.endswith("-") and len(out) > 1 and out[-2].isalpha() and text[:1].islower():
            out = out[:-1] + text
        else:
            out = f"{out} {text}"
    return out


def _shared(text: str, shares: list[int]) -> list[str]:
    """``text`` cut at spaces into as many parts as ``shares``, each about its share of the words."""
    if len(shares) == 1:
        return [text]
    words = text.split()
    cut = round(len(words) * shares[0] / max(1, sum(shares)))
    cut = min(max(cut, 1), max(1, len(words) - 1))
    return [" ".join(words[:cut]), " ".join(words[cut:])]


def _set_room(blocks: list[_Block], left: float, right: float, bottom: float) -> None:
    """Each block's ``room``: up to the nearest text right of its first line on that baseline, else to the page's
    right edge less a margin as wide as the page's left one (the page's text is taken to be centred); and its
    ``floor``: the top of the nearest text below it that shares some of its width, else that margin above the
    page's bottom."""
    margin = min((block.x0 for block in blocks), default=left) - left
    edge = max([right - margin] + [line.x1 for block in blocks for line in block.lines if line.x1 <= right])
    starts = [round(block.x0) for block in blocks]
    for block in blocks:
        first, room = block.lines[0], edge
        for other in blocks:
            if other is block:
                continue
            for line in other.lines:
                if abs(line.y - first.y) < first.size and line.x0 > first.x0 + 0.5 * first.size:
                    room = min(room, line.x0 - 0.5 * first.size)
        block.room = room
        if len(block.lines) == 1 and block.lines[0].runs[-1].width is not None:
            middle = (block.x0 + block.lines[0].x1) / 2
            alone = starts.count(round(block.x0)) == 1  # no other text starts at its left edge
            if alone and abs(middle - (left + right) / 2) < 0.01 * (right - left) and block.x0 - left > 2 * block.size:
                block.centre = middle
            elif alone and middle > (left + right) / 2 and abs(block.lines[0].x1 - edge) < 1.0:
                end, start = block.lines[0].x1, left + margin
                for other in blocks:
                    for line in other.lines if other is not block else ():
                        if abs(line.y - first.y) < first.size and line.x1 < block.x0:
                            start = max(start, line.x1 + 0.5 * first.size)
                block.flush_right, block.room = end, end + (block.x0 - start)
    for block in blocks:
        last, floor = block.lines[-1].y, bottom + margin
        x0, x1 = block.x0, max(block.x0 + block.width, block.room if len(block.lines) == 1 else 0)
        for other in blocks:
            top = other.lines[0].y + 0.8 * other.size
            if other is not block and other.lines[0].y < last - 0.1 * block.size and top > floor:
                if other.x0 < x1 and other.x0 + other.width > x0:
                    floor = top
        block.floor = floor


def _wrap(text: str, width: float, size: float, bold: bool, italic: bool) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and text_width(candidate, size, bold, italic) > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines or [""]


def _fit(block: _Block, text: str) -> tuple[float, float, list[str]]:
    """(size, leading, lines) for ``text`` in the block's room. A one-line block's translation stays on one line as
    far right as its ``room`` goes, made smaller down to 85 % if need be; a paragraph's is wrapped to its width.
    Either takes as many lines as fit above the text below (``floor``), at the block's size or smaller, down to
    SMALLEST of it; past that it is wrapped there and may reach the text below."""
    first = block.first
    bold, italic = block.style
    size, leading = block.size, block.leading
    single = len(block.lines) == 1
    width = max(min(block.width, block.room - block.x0), 4 * size)
    if single:
        width = max(block.room - block.x0, width)
        for scale in (1.0, 0.95, 0.9, 0.85):
            if text_width(text, size * scale, bold, italic) <= width:
                return size * scale, leading * scale, [text]
    scale = 1.0
    while scale >= SMALLEST - 1e-9:
        lines = _wrap(text, width, size * scale, bold, italic)
        below = first.y - block.floor - 0.6 * leading * scale  # half a line's space kept above the text below
        allowed = max(len(block.lines), 1 + int(below // (leading * scale)))
        if len(lines) <= allowed:
            return size * scale, leading * scale, lines
        scale -= 0.05
    return size * SMALLEST, leading * SMALLEST, _wrap(text, width, size * SMALLEST, bold, italic)


class PdfDocument:
    """A PDF read for translation: ``segments`` to translate, ``rebuild`` to write it translated."""

    def __init__(self, data: bytes):
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError

        try:
            self.reader = PdfReader(io.BytesIO(data), strict=False)
            if self.reader.is_encrypted and not self.reader.decrypt(""):
                raise PdfError("the PDF is encrypted with a password: send it unlocked")
            self.blocks: list[_Block] = []
            fonts: dict[int, Any] = {}
            for number, page in enumerate(self.reader.pages):
                blocks = _blocks(number, _lines(_runs(page, fonts)))
                box = page.mediabox
                _set_room(blocks, float(box.left), float(box.right), float(box.bottom))
                self.blocks += blocks
        except PdfError:
            raise
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as err:
            raise PdfError(f"not a PDF that can be read: {err}") from None
        self.data = data
        translated = [i for i, b in enumerate(self.blocks) if b.first.upright and LETTER.search(b.text)]
        self.groups = _across_pages(self.blocks, translated)
        """The blocks each segment is: one, or a paragraph's two halves either side of a page break."""
        self.segments = [Segment(_joined([self.blocks[i].text for i in group]), escape=False) for group in self.groups]

    def rebuild(self, done: list[tuple[str, Links]], target_lang: str | None = None) -> bytes:
        if not self.blocks:
            return self.data  # nothing to translate: the file as it came
        from pypdf.errors import PyPdfError

        try:
            return self._rebuild(done, target_lang)
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as err:
            raise PdfError(f"the PDF cannot be written again: {err}") from None

    def _rebuild(self, done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        from pypdf import PdfWriter

        texts: dict[int, str] = {}
        for group, (text, _) in zip(self.groups, done, strict=True):
            shares = [len(self.blocks[i].text) for i in group]
            texts.update(zip(group, _shared(text, shares), strict=True))
        _check_drawable(texts.values())
        writer = PdfWriter(clone_from=self.reader)
        stripped: set[int] = set()
        by_page: dict[int, list[int]] = {}
        for index, block in enumerate(self.blocks):
            by_page.setdefault(block.page, []).append(index)
        for number, page in enumerate(writer.pages):
            if number not in by_page:
                continue
            names = _add_fonts(page)
            operations = [([], b"q"), *_without_text(page.get_contents(), writer), ([], b"Q")]
            for index in by_page[number]:
                block, translated = self.blocks[index], texts.get(index)
                operations += _as_was(block, names) if translated is None else _draw(block, translated, names)
            page.replace_contents(_stream(operations, writer))
            page.compress_content_streams()
            self._strip_forms(page, writer, stripped)
        if target_lang:
            from pypdf.generic import NameObject, TextStringObject

            writer._root_object[NameObject("/Lang")] = TextStringObject(target_lang)
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()

    @staticmethod
    def _strip_forms(page: Any, writer: Any, stripped: set[int]) -> None:
        """Text drawn by the forms a page draws (and the forms they draw) is the page's text too: taken out."""
        for form in _forms(page.get("/Resources"), set()):
            key = id(form)
            if key in stripped:
                continue
            stripped.add(key)
            form.set_data(_stream(_without_text(form, writer), writer).get_data())


def _forms(resources: Any, seen: set[int]) -> Iterator[Any]:
    if resources is None:
        return
    xobjects = resources.get_object().get("/XObject")
    if xobjects is None:
        return
    for ref in xobjects.get_object().values():
        xobject = ref.get_object()
        if xobject.get("/Subtype") != "/Form" or id(xobject) in seen:
            continue
        seen.add(id(xobject))
        yield xobject
        yield from _forms(xobject.get("/Resources"), seen)


def _without_text(contents: Any, writer: Any) -> list[tuple[list[Any], bytes]]:
    from pypdf.generic import ContentStream

    if contents is None:
        return []
    stream = contents if isinstance(contents, ContentStream) else ContentStream(contents, writer)
    return [(operands, op) for operands, op in stream.operations if op not in SHOW_TEXT]


def _stream(operations: list[tuple[list[Any], bytes]], writer: Any) -> Any:
    """A content stream of ``operations``."""
    from pypdf.generic import ContentStream

    stream = ContentStream(None, writer)
    stream.operations = operations
    return stream


def _add_fonts(page: Any) -> dict[tuple[bool, bool], str]:
    """The four standard fonts in the page's resources, under names the page does not use; returns the names."""
    from pypdf.generic import DictionaryObject, NameObject

    if "/Resources" not in page:
        page[NameObject("/Resources")] = DictionaryObject()
    resources = page["/Resources"].get_object()
    if "/Font" not in resources:
        resources[NameObject("/Font")] = DictionaryObject()
    fonts = resources["/Font"].get_object()
    names = {}
    for style, base in FONTS.items():
        name = f"/MTF{'B' if style[0] else ''}{'I' if style[1] else ''}R"
        while name in fonts and fonts[name].get_object().get("/BaseFont") != base:
            name += "x"
        fonts[NameObject(name)] = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject(base),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )
        names[style] = name
    return names


def _draw(block: _Block, text: str, names: dict[tuple[bool, bool], str]) -> list[tuple[list[Any], bytes]]:
    """The operators that draw ``text``, the translation of an upright block, in the block's place."""
    from pypdf.generic import ByteStringObject, FloatObject, NameObject

    bold, italic = block.style
    size, leading, lines = _fit(block, text)
    font = NameObject(names[bold, italic])
    colour = _colour(block.lines[0].colour)
    ops: list[tuple[list[Any], bytes]] = [([], b"BT"), colour, ([font, FloatObject(size)], b"Tf")]
    x, y = block.x0, block.first.y
    for line in lines:
        if block.centre is not None:
            x = block.centre - text_width(line, size, bold, italic) / 2
        elif block.flush_right is not None:
            x = block.flush_right - text_width(line, size, bold, italic)
        ops.append(([FloatObject(round(v, 4)) for v in (1, 0, 0, 1, x, y)], b"Tm"))
        ops.append(([ByteStringObject(line.encode("cp1252", "replace"))], b"Tj"))
        y -= leading
    ops.append(([], b"ET"))
    return ops


def _colour(colour: tuple[bytes, tuple[float, ...]]) -> tuple[list[Any], bytes]:
    from pypdf.generic import FloatObject

    operator, values = colour
    return [FloatObject(round(v, 4)) for v in values], operator


def _as_was(block: _Block, names: dict[tuple[bool, bool], str]) -> list[tuple[list[Any], bytes]]:
    """A block not translated (no letter in it, or turned): each of its strings drawn again where it was."""
    from pypdf.generic import ByteStringObject, FloatObject, NameObject

    ops: list[tuple[list[Any], bytes]] = [([], b"BT")]
    for line in block.lines:
        for run in line.runs:
            ops.append(_colour(run.colour))
            dx, dy = run.direction
            ops.append(([NameObject(names[run.bold, run.italic]), FloatObject(round(run.size, 4))], b"Tf"))
            ops.append(([FloatObject(round(v, 4)) for v in (dx, dy, -dy, dx, run.x, run.y)], b"Tm"))
            ops.append(([ByteStringObject(run.text.strip().encode("cp1252", "replace"))], b"Tj"))
    ops.append(([], b"ET"))
    return ops


def read_pdf(data: bytes) -> PdfDocument:
    return PdfDocument(data)
