"""XLIFF (.xlf, .xliff), the format localization tools exchange strings in: versions 1.2 and 2.x.

Every unit to translate whose target is missing or empty gets one: its source's text with its inline codes, the
paired ones (1.2's ``<g>`` and ``<mrk>``, 2.x's ``<pc>`` and ``<mrk>``) as spans that go back on the aligned
words and the standalone ones (``<x/>``, ``<ph/>``, ``<bx/>``, ``<ex/>``, ``<bpt>``/``<ept>``, ``<it>``, 2.x's
``<sc/>``, ``<ec/>``, ``<cp/>``, and a marker that says its content is not translated) as placeholders the
models copy, each put back whole. A 1.2 target is marked
``state="needs-review-translation"`` for a translator to check (as a catalog's entries are marked fuzzy); a 2.x
segment in state ``initial`` (or none) becomes ``translated``. Units with ``translate="no"``, targets already
there, and 2.x's ``<ignorable>`` are left alone. Where the file does not name its target language (1.2's
``target-language``, 2.x's ``trgLang``), the model's is written. Read with a parser that expands no entities and
loads nothing from outside.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.inline import CONTAINER, LITERAL, Paragraph, append_text, local, namespace, read_mixed, write_mixed
from core.markup import Links, Segment, render
from core.office import xml_parser

V1 = "urn:oasis:names:tc:xliff:document:1.2"
V2 = "urn:oasis:names:tc:xliff:document:2.0"
"""2.1 and 2.2 keep 2.0's namespace for the core."""
_CONTAINERS = {V1: frozenset({"g", "mrk"}), V2: frozenset({"pc", "mrk"})}
_REVIEW = "needs-review-translation"


class XliffError(ValueError):
    """Not an XLIFF file this reader knows."""


@dataclass
class Xliff:
    segments: list[Segment]
    rebuild: Callable[[list[tuple[str, Links]], str | None], bytes]


def read_xliff(data: bytes) -> Xliff:
    from lxml import etree

    try:
        root = etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as err:
        raise XliffError(f"not XML: {err}") from None
    version = namespace(root)
    if local(root) != "xliff" or version not in (V1, V2):
        raise XliffError(f"not XLIFF 1.2 or 2.x (the root is {root.tag})")
    containers = _CONTAINERS[version]

    def kind(child: Any) -> str:
        paired = namespace(child) == version and local(child) in containers
        kept = child.get("mtype") == "protected" or child.get("translate") == "no"
        return CONTAINER if paired and not kept else LITERAL

    found: list[tuple[Any, Paragraph, Segment]] = []  # (where the target goes, the source read, its segment)
    for holder in _holders(root, version):
        source = holder.find(f"{{{version}}}source")
        target = holder.find(f"{{{version}}}target")
        if source is None or (target is not None and (len(target) or (target.text or "").strip())):
            continue
        paragraph = read_mixed(source, kind)
        segment = paragraph.segment()
        if segment is not None:
            found.append((holder, paragraph, segment))

    def rebuild(done: list[tuple[str, Links]], target_lang: str | None) -> bytes:
        if target_lang:
            _name_target_language(root, version, target_lang)
        for (holder, paragraph, segment), (translated, links) in zip(found, done, strict=True):
            source = paragraph.element
            target = holder.find(f"{{{version}}}target")
            if target is None:
                target = etree.Element(f"{{{version}}}target")
                target.tail = source.tail
                source.addnext(target)
            target.text = None
            for child in list(target):
                target.remove(child)
            write_mixed(target, paragraph, render(segment, translated, links), append_text, copies=True)
            if version == V1:
                target.set("state", _REVIEW)
            elif holder.get("state", "initial") == "initial":
                holder.set("state", "translated")
        return etree.tostring(root, xml_declaration=True, encoding="UTF-8")

    return Xliff([s for *_, s in found], rebuild)


def _holders(root: Any, version: str) -> list[Any]:
    """The elements that hold a source and its target: 1.2's ``trans-unit``, 2.x's ``segment``; without those of
    units marked ``translate="no"``."""
    if version == V1:
        return [u for u in root.iter(f"{{{V1}}}trans-unit") if u.get("translate", "yes") != "no"]
    holders = []
    for unit in root.iter(f"{{{V2}}}unit"):
        if unit.get("translate", "yes") != "no":
            holders += unit.findall(f"{{{V2}}}segment")
    return holders


def _name_target_language(root: Any, version: str, language: str) -> None:
    if version == V2:
        if not root.get("trgLang"):
            root.set("trgLang", language)
        return
    for file in root.iter(f"{{{V1}}}file"):
        if not file.get("target-language"):
            file.set("target-language", language)
