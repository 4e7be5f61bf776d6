"""/translate's glossary through real HTTP on the fake engine, which reverses each sentence's words and aligns
target word t to source word n-1-t (testkit/fake_engine.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.app import create_app
from service.models import ConfigurationError
from testkit.fake_engine import FakeLoader
from tests.service.servers import ThreadServer, settings_for, thread_server

GLOSSARY = {"password": "Kennwort"}


def post(server: ThreadServer, **body: object) -> dict[str, object]:
    r = server.client.post("/translate", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, object] = r.json()
    return out


def texts(body: dict[str, object]) -> list[str]:
    return [t["text"] for t in body["translations"]]  # type: ignore[attr-defined,index]


def test_terms_take_the_aligned_words_and_only_then_is_attention_asked(
    server: ThreadServer, loader: FakeLoader
) -> None:
    body = post(server, text=["alpha PASSWORD, beta", "no term here"], glossary=GLOSSARY)
    assert texts(body) == ["beta Kennwort, alpha", "here term no"]
    assert loader.last.options[-1].return_attention  # the alignment places the term
    assert texts(post(server, text="no term here", glossary=GLOSSARY)) == ["here term no"]
    assert not loader.last.options[-1].return_attention  # no term found: the step without attention rows
    # a translation that holds the term's translation already is left as it is
    assert texts(post(server, text="alpha password", glossary={"alpha": "ALPHA"})) == ["password alpha"]
    metrics, model = server.client.get("/metrics").text, server.client.get("/model").json()["name"]
    for outcome, count in (("replaced", 1), ("present", 1), ("unplaced", 0)):
        assert f'mt_glossary_terms_total{{model="{model}",outcome="{outcome}"}} {count:.1f}' in metrics


def test_the_alignment_returned_names_the_term(server: ThreadServer) -> None:
    body = post(server, text="alpha password beta", glossary=GLOSSARY, return_attention=True)
    translation = body["translations"][0]  # type: ignore[index]
    links = {(link["target_word"], link["source_word"]) for link in translation["alignment"]}
    assert ("Kennwort", "password") in links
    assert translation["attention"]["target_tokens"] == ["▁beta", "▁password", "▁alpha"]  # the model's pieces


def test_markup_goes_around_the_term(server: ThreadServer) -> None:
    body = post(server, text="<p>alpha <b>password</b> beta</p>", format="html", glossary=GLOSSARY)
    assert texts(body) == ["<p>beta <b>Kennwort</b> alpha</p>"]


@pytest.mark.parametrize(
    ("glossary", "message"),
    [
        ({"password": ""}, "need a word"),
        ({"Password": "Kennwort", "password": "Passwort"}, "listed twice"),
        ({"password": 1}, "glossary.password"),
        ({f"t{i}": "x" for i in range(1001)}, "limit is 1000"),
    ],
)
def test_unusable_glossaries_are_a_422_naming_the_entry(
    shared_server: ThreadServer, glossary: dict[str, object], message: str
) -> None:
    r = shared_server.client.post("/translate", json={"text": "x", "glossary": glossary})
    assert r.status_code == 422 and message in r.text, r.text


def test_documents_take_a_glossary_as_a_json_form_field(shared_server: ThreadServer) -> None:
    def send(glossary: str) -> tuple[int, bytes]:
        files = {"file": ("notes.txt", b"alpha password beta\n")}
        r = shared_server.client.post("/translate/document", files=files, data={"glossary": glossary})
        return r.status_code, r.content

    assert send('{"password": "Kennwort"}') == (200, b"beta Kennwort alpha\n")
    status, body = send("{password: Kennwort}")
    assert status == 422 and b"glossary: not JSON" in body
    status, body = send('["password"]')
    assert status == 422 and b"glossary" in body


def test_the_servers_glossary_serves_every_api_and_a_request_wins(fake_bundle: Path, tmp_path: Path) -> None:
    path = tmp_path / "glossary.json"
    path.write_text('{"en-de": {"password": "Kennwort", "beta": "Gamma"}, "fr-de": {"mot": "Wort"}}', encoding="utf-8")
    with thread_server(settings_for(fake_bundle, glossary=path), FakeLoader()) as server:
        assert texts(post(server, text="alpha password beta")) == ["Gamma Kennwort alpha"]
        assert texts(post(server, text="alpha password beta", glossary={"Password": "Passwort"})) == [
            "Gamma Passwort alpha"
        ]
        r = server.client.post(
            "/libretranslate/translate", json={"q": "alpha password", "source": "en", "target": "de"}
        )
        assert r.status_code == 200 and r.json()["translatedText"] == "Kennwort alpha", r.text


def test_an_unusable_glossary_file_stops_the_server_at_start(fake_bundle: Path, tmp_path: Path) -> None:
    path = tmp_path / "glossary.json"
    path.write_text('{"en-de": {"password": ""}}', encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"MT_GLOSSARY .*glossary.json: en-de: glossary entry 'password'"):
        create_app(settings_for(fake_bundle, glossary=path), engine_loader=FakeLoader())
