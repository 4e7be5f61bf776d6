"""bench/documents.py: every kind's file is made, read and written again with as many segments as paragraphs."""

from __future__ import annotations

import pytest

from bench import documents

PARAGRAPHS = ["Open the file menu.", "Choose a new name for the document.", "Click Save to keep your changes."]


@pytest.mark.parametrize("kind", sorted(documents.KINDS))
def test_each_kind_is_made_read_and_written(kind: str) -> None:
    pytest.importorskip(
        {"docx": "docx", "pptx": "pptx", "xlsx": "openpyxl", "odt": "odf", "epub": "ebooklib"}.get(kind, "json")
    )
    result = documents.time_file(kind, documents.KINDS[kind](PARAGRAPHS), repeats=1)
    # an e-book adds its title and table of contents, a page its <html> skeleton holds nothing more
    assert result["segments"] >= len(PARAGRAPHS) and result["read_s"] > 0 and result["write_s"] > 0
