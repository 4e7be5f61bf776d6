"""core/markdown.py: Markdown comes back as Markdown, emphasis and links around the same words, targets and code
untouched."""

from __future__ import annotations

import re
from collections import Counter

from core.markdown import parse_markdown
from tests.core.reorder import reordered

DOCUMENT = """---
title: Saving
---
# Saving your *work*

Click **Save** to store [your changes](https://x.org/a_b "Help") now.
Run `ls -l` and see ![logo](img/logo.png) or <https://x.org>.

- First _item_ here
- [ ] Second ~~old~~ item
1. Numbered one

> A quote with **bold text**

```sh
code **stays** [as](is)
```

    indented code *stays*

| Name | Value |
|------|-------|
| One *a* | Two |

[ref]: https://x.org/ref
Visit https://example.org/path_x for snake_case_word details.
"""


def translate(text: str, reverse: bool) -> str:
    return reordered(parse_markdown(text), "reverse" if reverse else "same")


def test_unchanged_words_give_the_document_back() -> None:
    joined = DOCUMENT.replace("now.\nRun", "now. Run")  # a paragraph's lines come back as one line
    assert translate(DOCUMENT, reverse=False) == joined


def test_reordered_words_keep_their_markup_and_everything_else_stays() -> None:
    out = translate(DOCUMENT, reverse=True)
    for kept in (
        "---\ntitle: Saving\n---\n",
        '(https://x.org/a_b "Help")',
        "`ls -l`",
        "![logo](img/logo.png)",
        "<https://x.org>",
        "```sh\ncode **stays** [as](is)\n```\n",
        "    indented code *stays*\n",
        "|------|-------|\n",
        "[ref]: https://x.org/ref\n",
        "https://example.org/path_x",
        "snake_case_word",
    ):
        assert kept in out, kept
    assert "# *work* your Saving\n" in out
    assert "- here _item_ First\n" in out and "- [ ] item ~~old~~ Second\n" in out
    assert "> **text bold** with quote A\n" in out
    assert '[changes your](https://x.org/a_b "Help")' in out and "**Save**" in out
    assert "| *a* One | Two |" in out
    markers = lambda text: Counter(re.findall(r"\*\*|~~|(?<![\w*])[*_](?=\w)", text))  # noqa: E731
    assert markers(out) == markers(DOCUMENT)


def test_unmatched_delimiters_are_text() -> None:
    segment = parse_markdown("2 * 3 = 6 and a_b_c or [not a link] *open").segments[0]
    assert segment.spans == [] and segment.literals == {}
