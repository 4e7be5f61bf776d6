"""XLIFF (core/xliff.py): untranslated units filled, inline codes kept, the rest of the file as it was.

Outputs of version 1.2 are read back with translate-toolkit's XLIFF store (an independent reader, the one
Pootle and Weblate build on); 2.x's with lxml. The "translation" reverses the words, so that a paired code which
follows the alignment moves.
"""

from __future__ import annotations

import pytest
from lxml import etree

from core.documents import DocumentError, read_document
from core.xliff import V1, V2

V12 = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="{V1}">
  <file original="app.properties" source-language="en" datatype="plaintext">
    <body>
      <trans-unit id="save">
        <source>Click <g id="1" ctype="bold">Save</g> to keep your changes</source>
      </trans-unit>
      <trans-unit id="count">
        <source>You have <x id="1"/> new messages</source>
        <target/>
      </trans-unit>
      <trans-unit id="done">
        <source>Already done</source>
        <target state="translated">Schon erledigt</target>
      </trans-unit>
      <trans-unit id="brand" translate="no">
        <source>Acme Writer</source>
      </trans-unit>
      <group id="menu">
        <trans-unit id="open">
          <source>Open <mrk mtype="protected">config.yaml</mrk> now</source>
        </trans-unit>
      </group>
    </body>
  </file>
</xliff>
"""

V20 = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="{V2}" version="2.0" srcLang="en">
  <file id="f1">
    <unit id="u1">
      <segment>
        <source>Press <pc id="1" dataRefStart="d1">the red button</pc> twice</source>
      </segment>
      <ignorable><source> </source></ignorable>
      <segment state="final">
        <source>Done</source>
        <target>Fertig</target>
      </segment>
    </unit>
    <unit id="u2">
      <segment>
        <source>Copied <ph id="1" equiv="%d"/> files</source>
      </segment>
    </unit>
  </file>
</xliff>
"""


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(reversed(words)).upper(), [(i, len(words) - 1 - i) for i in range(len(words))]


def translate(name: str, data: str, target: str | None = "de") -> bytes:
    document = read_document(name, data.encode())
    return document.rebuild([reverse(s.text) for s in document.segments], target)


def test_version_1_2_units_are_filled_for_review_with_their_codes() -> None:
    xliff = pytest.importorskip("translate.storage.xliff")
    assert [s.text for s in read_document("a.xlf", V12.encode()).segments] == [
        "Click Save to keep your changes",
        "You have {1} new messages",
        "Open {1} now",
    ]
    out = translate("a.xlf", V12)
    store = xliff.xlifffile(out)
    units = {u.getid().split("\x04")[-1]: u for u in store.units}  # ids are "file\x04id"
    assert units["save"].target == "CHANGES YOUR KEEP TO SAVE CLICK"
    assert units["done"].target == "Schon erledigt"  # translated already: untouched
    assert not units["brand"].target  # translate="no"
    assert units["open"].target == "NOW config.yaml OPEN"
    root = etree.fromstring(out)
    ns = {"x": V1}
    target = root.find(".//x:trans-unit[@id='save']/x:target", ns)
    assert target.get("state") == "needs-review-translation"
    assert (
        etree.tostring(target.find("x:g", ns), with_tail=False)
        == f'<g xmlns="{V1}" id="1" ctype="bold">SAVE</g>'.encode()
    )
    count = root.find(".//x:trans-unit[@id='count']/x:target", ns)
    assert len(root.findall(".//x:trans-unit[@id='count']/x:target", ns)) == 1  # the empty target, filled
    assert (
        "".join(count.itertext()).split() == ["MESSAGES", "NEW", "HAVE", "YOU"]
        and count.find("x:x", ns).get("id") == "1"
    )
    opened = root.find(".//x:trans-unit[@id='open']/x:target", ns)
    assert opened.find("x:mrk", ns).text == "config.yaml"  # protected: copied, not translated
    assert root.find("x:file", ns).get("target-language") == "de"
    source = root.find(".//x:trans-unit[@id='save']/x:source", ns)
    assert "".join(source.itertext()) == "Click Save to keep your changes"  # the source is kept


def test_version_2_segments_are_filled_and_marked_translated() -> None:
    out = etree.fromstring(translate("a.xliff", V20))
    ns = {"x": V2}
    assert out.get("trgLang") == "de"
    first, done = out.findall(".//x:unit[@id='u1']/x:segment", ns)
    assert first.get("state") == "translated" and done.get("state") == "final"
    target = first.find("x:target", ns)
    assert "".join(target.itertext()) == "TWICE BUTTON RED THE PRESS"
    assert target.find("x:pc", ns).get("dataRefStart") == "d1" and target.find("x:pc", ns).text == "BUTTON RED THE"
    assert done.find("x:target", ns).text == "Fertig"
    copied = out.find(".//x:unit[@id='u2']/x:segment/x:target", ns)
    assert copied.find("x:ph", ns).get("equiv") == "%d"
    assert out.find(".//x:ignorable/x:target", ns) is None


def test_a_language_the_file_names_is_kept() -> None:
    out = etree.fromstring(translate("a.xliff", V20.replace('srcLang="en"', 'srcLang="en" trgLang="de-AT"'), "de"))
    assert out.get("trgLang") == "de-AT"


@pytest.mark.parametrize(
    ("data", "message"),
    [("<xliff", "not XML"), ("<root/>", "not XLIFF"), ('<xliff version="1.2"/>', "not XLIFF")],
)
def test_what_is_not_xliff_is_refused(data: str, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        read_document("a.xlf", data.encode())
