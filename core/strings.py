"""Strings of software (catalog entries, app string resources): their placeholders, accelerators and outer
whitespace kept through translation.

``protect(source)`` gives the string as a segment to translate: leading and trailing whitespace (line breaks
included) set aside, an accelerator (``_File``, ``&Open``, ``~Save``) taken out, and every placeholder (printf's
``%s``, ``%1$s``, ``%(name)s`` and Objective-C's ``%@``, ``%1``, ``{name}``, ``{{name}}``, ``${var}``) a literal
``{n}`` the models copy. ``restore`` puts it together again from the translation: the placeholders verbatim (a
lost one at the end), positional printf directives in the source's order where the format takes its arguments in
order, the accelerator before the first letter, the whitespace as the source had it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.markup import Segment, render

PRINTF = r"%(?:\d+\$|\([^)\s]+\))?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsaAp@%]"
PLACEHOLDERS = re.compile(rf"\{{\{{[^{{}}]+\}}\}}|{PRINTF}|%\d+|\{{[^{{}}\s]*\}}|\$\{{[^{{}}]+\}}")
_POSITIONAL = re.compile(
    r"%(?![(%]|\d+\$)[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsaAp@]"
)
"""printf directives that take their argument by position in the list: their order must stay."""
_ACCELERATOR = re.compile(r"(?<![\w&_~])([_&~])(?=[^\W\d_])")
_LETTER = re.compile(r"[^\W\d_]")


@dataclass
class Protected:
    segment: Segment
    lead: str
    trail: str
    accelerator: str
    ordered: list[str]
    """The positional printf directives in source order, where the format needs them in that order."""

    @property
    def translatable(self) -> bool:
        return has_words(self.segment.text)


def has_words(text: str) -> bool:
    """Whether ``text`` has words to translate: a letter once placeholders (``{1}`` among them) are set aside, not
    only digits and punctuation."""
    return bool(_LETTER.search(PLACEHOLDERS.sub("", text)))


def protect(source: str, ordered: bool = False, accelerators: bool = True) -> Protected:
    """``source`` ready to translate; ``ordered`` when its format takes printf arguments in order (c-format),
    ``accelerators`` when a ``_``, ``&`` or ``~`` before a letter marks a keyboard accelerator (menus, dialogs)."""
    body = source.strip()
    start = source.index(body) if body else len(source)
    lead, trail = source[:start], source[start + len(body) :]
    found = _ACCELERATOR.findall(body) if accelerators else []
    accelerator = found[0] if len(found) == 1 else ""
    if accelerator:
        body = _ACCELERATOR.sub("", body, count=1)
    literals: dict[str, str] = {}

    def keep(match: re.Match[str]) -> str:
        key = "{" + str(len(literals) + 1) + "}"
        literals[key] = match.group(0)
        return key

    protected = PLACEHOLDERS.sub(keep, body)
    in_order = [p for p in literals.values() if _POSITIONAL.fullmatch(p)] if ordered else []
    return Protected(Segment(protected, literals=literals, escape=False), lead, trail, accelerator, in_order)


def restore(protected: Protected, translated: str) -> str:
    """The translation of a protected string, as the source's format wants it."""
    text = render(protected.segment, translated, [])
    if protected.ordered:  # printf-style formats take their arguments in order: the source's order it is
        found = list(_POSITIONAL.finditer(text))
        if [m.group(0) for m in found] != protected.ordered and len(found) == len(protected.ordered):
            pieces, position = [], 0
            for match, placeholder in zip(found, protected.ordered, strict=True):
                pieces += [text[position : match.start()], placeholder]
                position = match.end()
            text = "".join(pieces) + text[position:]
    if protected.accelerator:
        letter = _LETTER.search(text)
        if letter is not None:
            text = text[: letter.start()] + protected.accelerator + text[letter.start() :]
    return protected.lead + text + protected.trail
