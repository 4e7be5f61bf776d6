"""App string resources (core/resources.py): JSON, Android, Apple .strings and Java .properties.

Outputs are read back with the formats' own readers where Python has an independent one (``json``,
``javaproperties``; lxml for Android's XML). The "translation" reverses the words and writes them in capitals,
so that what was translated, and where placeholders and inline tags went, shows.
"""

from __future__ import annotations

import json

import pytest
from lxml import etree

from core.documents import DocumentError, read_document

javaproperties = pytest.importorskip("javaproperties")


def reverse(text: str) -> tuple[str, list[tuple[int, int]]]:
    words = text.split()
    return " ".join(reversed(words)).upper(), [(i, len(words) - 1 - i) for i in range(len(words))]


def translate(name: str, data: bytes) -> bytes:
    document = read_document(name, data)
    return document.rebuild([reverse(s.text) for s in document.segments], "de")


def test_json_values_are_translated_keys_placeholders_and_icu_messages_kept() -> None:
    source = {
        "app": {"title": "My great app", "greeting": "Hello {{name}}, you have %d messages", "version": "1.2"},
        "cart": "{count, plural, one {# item} other {# items}}",
        "menu": ["Open file", "  Close  "],
        "size": 3,
    }
    text = json.dumps(source, indent=4) + "\n"
    out = translate("en.json", text.encode())
    assert out.decode().startswith('{\n    "app": {\n        "title"') and out.endswith(b"}\n")  # indented as read
    data = json.loads(out)
    assert list(data) == list(source) and list(data["app"]) == list(source["app"])
    assert data["app"]["title"] == "APP GREAT MY"
    assert data["app"]["greeting"] == "MESSAGES %d HAVE YOU {{name}}, HELLO"
    assert data["app"]["version"] == "1.2" and data["size"] == 3
    assert data["cart"] == source["cart"]  # ICU plural syntax: not for a sentence model
    assert data["menu"] == ["FILE OPEN", "  CLOSE  "]


def test_flutter_arb_metadata_is_kept_and_its_locale_becomes_the_target() -> None:
    source = {
        "@@locale": "en",
        "hello": "Hello world!",
        "@hello": {"description": "The greeting"},
        "greeting": "Hello {name}",
        "@greeting": {"placeholders": {"name": {"type": "String"}}},
    }
    data = json.loads(translate("app_en.arb", json.dumps(source).encode()))
    assert data == {**source, "@@locale": "de", "hello": "WORLD! HELLO", "greeting": "{name} HELLO"}


def test_a_webextensions_messages_are_translated_not_its_notes() -> None:
    source = {"appName": {"message": "Tab manager", "description": "The name of the app"}}
    data = json.loads(translate("messages.json", json.dumps(source).encode()))
    assert data == {"appName": {"message": "MANAGER TAB", "description": "The name of the app"}}


ANDROID = r"""<?xml version="1.0" encoding="utf-8"?>
<resources xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">
    <!-- kept as it is -->
    <string name="app_name" translatable="false">Acme</string>
    <string name="welcome">Welcome to <b>Acme Writer</b>, %1$s!</string>
    <string name="dont">Don\'t save the \"draft\"</string>
    <string name="count">You have <xliff:g id="count" example="3">%d</xliff:g> new messages</string>
    <string name="ref">@string/app_name</string>
    <string-array name="planets"><item>Red planet</item><item>Blue planet</item></string-array>
    <plurals name="files">
        <item quantity="one">%d file deleted</item>
        <item quantity="other">%d files deleted</item>
    </plurals>
    <string name="lines">First line\nSecond line</string>
    <string name="amp">Tom &amp; Jerry</string>
</resources>
"""


def test_android_strings_keep_tags_placeholders_and_escapes() -> None:
    out = translate("strings.xml", ANDROID.encode())
    root = etree.fromstring(out)
    by_name = {e.get("name"): e for e in root}
    xml = {name: etree.tostring(e, encoding="unicode", with_tail=False) for name, e in by_name.items()}
    assert by_name["app_name"].text == "Acme" and by_name["ref"].text == "@string/app_name"
    assert xml["welcome"].endswith('name="welcome">%1$s! <b>WRITER, ACME</b> TO WELCOME</string>')
    assert by_name["dont"].text == '\\"DRAFT\\" THE SAVE DON\\\'T'
    count = by_name["count"]
    g = count.find("{urn:oasis:names:tc:xliff:document:1.2}g")
    assert g is not None and g.text == "%d" and g.get("example") == "3"
    assert "".join(count.itertext()).split() == ["MESSAGES", "NEW", "%d", "HAVE", "YOU"]
    assert [i.text for i in by_name["planets"]] == ["PLANET RED", "PLANET BLUE"]
    assert [i.text for i in by_name["files"]] == ["DELETED FILE %d", "DELETED FILES %d"]
    assert by_name["lines"].text == "LINE SECOND\\nLINE FIRST"
    assert by_name["amp"].text == "JERRY & TOM" and b"JERRY &amp; TOM" in out
    assert b"<!-- kept as it is -->" in out and out.count(b"xmlns:xliff") == 1


def test_apple_strings_keep_comments_keys_and_their_encoding() -> None:
    source = (
        '/* Title of the main window; "quoted" */\n"main.title" = "Main window";\n'
        '"greet" = "Hello %@, say \\"hi\\"";\n// not = "an entry";\n"num" = "42";\n'
    )
    for encoding in ("utf-8", "utf-16"):
        out = translate("Localizable.strings", source.encode(encoding)).decode(encoding)
        assert out.startswith('/* Title of the main window; "quoted" */\n"main.title" = "WINDOW MAIN";\n')
        assert '"greet" = "\\"HI\\" SAY %@, HELLO";' in out
        assert '// not = "an entry";\n"num" = "42";\n' in out


def test_java_properties_read_back_by_an_independent_reader() -> None:
    source = (
        "# comment = not a value\n"
        "greeting = Hello {0}, how are you?\n"
        "long: This is a very \\\n"
        "    long line\n"
        "accented = Caf\\u00e9 is open \\ud83d\\ude00\n"
        "empty=\n"
        "num 42\n"
    )
    out = translate("messages.properties", source.encode("latin-1"))
    assert out.decode("latin-1").startswith("# comment = not a value\ngreeting = ")
    read = javaproperties.loads(out.decode("latin-1"))
    assert read == {
        "greeting": "YOU? ARE HOW {0}, HELLO",
        "long": "LINE LONG VERY A IS THIS",
        "accented": "\U0001f600 OPEN IS CAFÉ",
        "empty": "",
        "num": "42",
    }
    assert "\\u00c9" in out.decode("latin-1")  # non-ASCII written as the format's escapes


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("a.json", b"{nope", "not JSON"),
        ("a.json", b"[" * 5000 + b"]" * 5000, "too deep"),
        ("a.json", b"[" * 300 + b'"hello"' + b"]" * 300, "more than 200 levels"),
        ("a.xml", b"<resources", "not XML"),
        ("a.xml", b"<layout><p>a</layout>", "not XML"),  # not Android's: any XML, which this is not
        ("a.dita", b"<topic>&undefined;</topic>", "not XML"),
        ("a.xml", b'<?xml version="1.0" encoding="nonsense"?><p>a</p>', "not XML|encoding"),
        ("a.strings", b"just words", 'no "key" = "value"'),
    ],
)
def test_what_is_not_a_resource_is_refused(name: str, data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        read_document(name, data)


DOCBOOK = """<?xml version="1.0" encoding="ISO-8859-1"?>
<!DOCTYPE manual SYSTEM "manual.dtd">
<manual lang="en">
  <title>The Manual</title>
  <!-- kept as it is -->
  <chapter id="c1">
    <para>Install &product; with <command>make install</command> and click <guibutton>Save</guibutton>.</para>
    <para><![CDATA[if (a < b)]]> stays, caf\u00e9 too.</para>
  </chapter>
</manual>
"""


@pytest.mark.parametrize("name", ["manual.xml", "topic.dita"])
def test_any_other_xml_is_translated_where_its_text_is_in_its_own_encoding(name: str) -> None:
    data = DOCBOOK.encode("latin-1")
    document = read_document(name, data)
    assert [s.text for s in document.segments][:2] == ["The Manual", "Install {1} with make install and click Save."]
    # a translation the file's encoding cannot hold comes back as character references
    out = document.rebuild([(s.text.upper() + " \u0151", [(0, 0)]) for s in document.segments])
    root = etree.fromstring(out, etree.XMLParser(resolve_entities=False, load_dtd=False))
    assert out.startswith(b'<?xml version="1.0" encoding="ISO-8859-1"?>\n<!DOCTYPE manual SYSTEM "manual.dtd">')
    assert b"<!-- kept as it is -->" in out and b"&product;" in out and b"<![CDATA[if (a < b)]]>" in out
    assert root.findtext("title") == "THE MANUAL \u0151" and b"&#337;" in out
    assert [e.tag for e in root.iter() if isinstance(e.tag, str)] == [
        "manual",
        "title",
        "chapter",
        "para",
        "command",
        "guibutton",
        "para",
    ]
    assert "CAF\u00c9" in out.decode("latin-1")


def test_an_android_resource_is_still_read_as_one() -> None:
    document = read_document("strings.xml", b'<resources><string name="a">Hello <b>you</b></string></resources>')
    assert [s.text for s in document.segments] == ["Hello you"]
    assert read_document("other.xml", b"<layout><text>Hello you</text></layout>").segments[0].text == "Hello you"


@pytest.mark.parametrize(
    ("name", "data", "texts"),
    [
        (
            "guide.dbk",
            b"<article><para>Run <command>make install</command> as <systemitem>root</systemitem>.</para></article>",
            ["Run {1} as {2}."],
        ),
        (  # an .xml whose root (or namespace) is DocBook's
            "guide.xml",
            b'<article xmlns="http://docbook.org/ns/docbook"><para>Open <filename>a b.txt</filename></para></article>',
            ["Open {1}"],
        ),
        (
            "task.dita",
            b"<task><taskbody><cmd>Type <userinput>make all</userinput> and press <uicontrol>OK</uicontrol>.</cmd>"
            b"<codeblock>make all\nmake install</codeblock></taskbody></task>",
            ["Type {1} and press OK."],
        ),
        ("other.xml", b"<doc><para>Run <command>make</command> now</para></doc>", ["Run make now"]),
    ],
)
def test_docbooks_and_ditas_code_is_kept_as_it_is(name: str, data: bytes, texts: list[str]) -> None:
    document = read_document(name, data)
    assert [s.text for s in document.segments] == texts
    out = document.rebuild([(s.text.upper(), []) for s in document.segments])
    for kept in (b"<command>make install</command>", b"<filename>a b.txt</filename>", b"<codeblock>make all\n"):
        if kept in data:
            assert kept in out


def test_the_documents_language_becomes_the_translations() -> None:
    page = read_document("a.html", b'<!DOCTYPE html><html lang="en"><body><p>Hi there</p></body></html>')
    assert (
        page.rebuild([("Hallo da", [])], "de") == b'<!DOCTYPE html><html lang="de"><body><p>Hallo da</p></body></html>'
    )
    topic = read_document("a.dita", b"<?xml version='1.0'?><topic xml:lang='en-US' id='t'><title>Hi</title></topic>")
    assert b"<topic xml:lang='de' id='t'>" in topic.rebuild([("Hallo", [])], "de")
    bare = read_document("a.xml", b"<doc><p>Hi</p></doc>")  # no language named: none added
    assert bare.rebuild([("Hallo", [])], "de") == b"<doc><p>Hallo</p></doc>"
