"""/aws: Amazon Translate's API, through AWS's own Python SDK (boto3's ``translate`` client, pointed at the server
by ``endpoint_url``; it signs every request as it would for AWS). The fake engine reverses each sentence's words
behind a ""/"en:" prefix and aligns target word t to source word n-1-t."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.exceptions import ClientError  # noqa: E402

from testkit.fake_engine import FakeLoader, write_fake_bundle  # noqa: E402
from tests.service.servers import ThreadServer, settings_for, thread_server, two_way_server  # noqa: E402

ENGLISH = "The file could not be saved."
TARGET = "AWSShineFrontendService_20170701."


def _client(url: str, key: str = "any") -> Any:
    return boto3.client(
        "translate",
        endpoint_url=url + "/aws",
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key="not checked",
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    with two_way_server(tmp_path_factory.mktemp("aws"), max_chars=2000) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ThreadServer) -> Any:
    return _client(server.url)


def _reversed(sentence: str) -> str:
    return " ".join(reversed(sentence.split()))


def _code(err: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = err.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_boto3_translates_text_detecting_the_source_and_lists_languages(client: Any) -> None:
    done = client.translate_text(Text=ENGLISH, SourceLanguageCode="auto", TargetLanguageCode="de")
    assert (done["TranslatedText"], done["SourceLanguageCode"], done["TargetLanguageCode"]) == (
        _reversed(ENGLISH),
        "en",
        "de",
    )
    assert done["ResponseMetadata"]["RequestId"]  # x-amzn-RequestId
    done = client.translate_text(Text="Die Datei ist weg.", SourceLanguageCode="de", TargetLanguageCode="en")
    assert done["TranslatedText"] == "en:weg. ist Datei Die"
    same = client.translate_text(Text=ENGLISH, SourceLanguageCode="en", TargetLanguageCode="en")
    assert same["TranslatedText"] == ENGLISH
    listed = client.list_languages()
    assert listed["Languages"] == [
        {"LanguageName": "German", "LanguageCode": "de"},
        {"LanguageName": "English", "LanguageCode": "en"},
    ]
    first = client.list_languages(MaxResults=1)
    second = client.list_languages(MaxResults=1, NextToken=first["NextToken"])
    assert first["Languages"] + second["Languages"] == listed["Languages"] and "NextToken" not in second


def test_terminologies_are_imported_used_read_back_and_deleted(server: ThreadServer, client: Any) -> None:
    terms = "en,de\npassword,Kennwort\nsave,sichern\n"
    made = client.import_terminology(
        Name="it-terms", MergeStrategy="OVERWRITE", TerminologyData={"File": terms.encode(), "Format": "CSV"}
    )["TerminologyProperties"]
    assert (made["Name"], made["SourceLanguageCode"], made["TargetLanguageCodes"], made["TermCount"]) == (
        "it-terms",
        "en",
        ["de"],
        2,
    )
    assert made["Directionality"] == "UNI" and made["CreatedAt"].year >= 2026
    done = client.translate_text(
        Text="Enter the password", SourceLanguageCode="en", TargetLanguageCode="de", TerminologyNames=["it-terms"]
    )
    assert done["TranslatedText"] == "Kennwort the Enter"  # the fake's "password" replaced by the term
    assert done["AppliedTerminologies"] == [
        {"Name": "it-terms", "Terms": [{"SourceText": "password", "TargetText": "Kennwort"}]}
    ]
    # the terminology is one of the server's glossaries: DeepL's API lists it too
    assert "it-terms" in [g["name"] for g in server.client.get("/deepl/v3/glossaries").json()["glossaries"]]
    got = client.get_terminology(Name="it-terms")
    location = got["TerminologyDataLocation"]
    assert location["RepositoryType"] == "S3"
    with urllib.request.urlopen(location["Location"]) as answer:  # a link, as AWS's to S3
        assert answer.read().decode() == terms
    # OVERWRITE replaces the terms; MULTI makes every column a source; TMX and TSV are read too
    tmx = (
        '<?xml version="1.0"?><tmx version="1.4"><header srclang="de"/><body>'
        '<tu><tuv xml:lang="de"><seg>Kennwort</seg></tuv><tuv xml:lang="en"><seg>passphrase</seg></tuv></tu>'
        "</body></tmx>"
    )
    client.import_terminology(
        Name="it-terms",
        MergeStrategy="OVERWRITE",
        TerminologyData={"File": tmx.encode(), "Format": "TMX", "Directionality": "MULTI"},
    )
    back = client.translate_text(
        Text="Enter the passphrase", SourceLanguageCode="en", TargetLanguageCode="de", TerminologyNames=["it-terms"]
    )
    assert back["TranslatedText"] == "Kennwort the Enter"
    tsv = client.import_terminology(
        Name="tab-terms",
        MergeStrategy="OVERWRITE",
        TerminologyData={"File": b"de\ten\nDatei\tdocument\n", "Format": "TSV"},
    )["TerminologyProperties"]
    assert (tsv["SourceLanguageCode"], tsv["TargetLanguageCodes"]) == ("de", ["en"])
    names = [t["Name"] for t in client.list_terminologies()["TerminologyPropertiesList"]]
    assert names == ["it-terms", "tab-terms"]
    client.delete_terminology(Name="it-terms")
    client.delete_terminology(Name="tab-terms")
    with pytest.raises(ClientError) as raised:
        client.get_terminology(Name="it-terms")
    assert _code(raised) == (404, "ResourceNotFoundException")
    with pytest.raises(ClientError) as raised:
        client.translate_text(Text="a", SourceLanguageCode="en", TargetLanguageCode="de", TerminologyNames=["gone"])
    assert _code(raised) == (404, "ResourceNotFoundException")


def test_documents_come_back_translated_in_their_format(client: Any) -> None:
    docx = pytest.importorskip("docx")
    html = client.translate_document(
        Document={"Content": b"<p>Click <b>Save</b> now.</p>", "ContentType": "text/html"},
        SourceLanguageCode="en",
        TargetLanguageCode="de",
    )
    assert html["TranslatedDocument"]["Content"] == b"<p>now. <b>Save</b> Click</p>"
    text = client.translate_document(
        Document={"Content": b"Open the file.\n\nSave it.\n", "ContentType": "text/plain"},
        SourceLanguageCode="auto",
        TargetLanguageCode="de",
    )
    assert text["TranslatedDocument"]["Content"] == b"file. the Open\n\nit. Save\n"
    assert text["SourceLanguageCode"] == "en"  # detected on the document, as AWS does with auto
    written = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("Open the file.")
    document.save(written)
    kind = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    done = client.translate_document(
        Document={"Content": written.getvalue(), "ContentType": kind}, SourceLanguageCode="en", TargetLanguageCode="de"
    )
    read = docx.Document(io.BytesIO(done["TranslatedDocument"]["Content"]))
    assert [p.text for p in read.paragraphs] == ["file. the Open"]


@pytest.mark.parametrize(
    ("call", "status", "code", "message"),
    [
        (
            dict(Text="a", SourceLanguageCode="en", TargetLanguageCode="fr"),
            400,
            "UnsupportedLanguagePairException",
            "en→fr",
        ),
        (
            dict(Text="a", SourceLanguageCode="en", TargetLanguageCode="de", Settings={"Formality": "FORMAL"}),
            400,
            "InvalidRequestException",
            "Formality",
        ),
        (
            dict(Text="x" * 2001, SourceLanguageCode="en", TargetLanguageCode="de"),
            400,
            "TextSizeLimitExceededException",
            "2000",
        ),
        (
            dict(Text="a", SourceLanguageCode="eng1", TargetLanguageCode="de"),
            400,
            "InvalidParameterValueException",
            "eng1",
        ),
        (
            dict(Text="12345", SourceLanguageCode="auto", TargetLanguageCode="de"),
            400,
            "DetectedLanguageLowConfidenceException",
            "detected",
        ),
    ],
)
def test_errors_have_aws_types(client: Any, call: dict[str, Any], status: int, code: str, message: str) -> None:
    with pytest.raises(ClientError) as raised:
        client.translate_text(**call)
    assert _code(raised) == (status, code) and message in raised.value.response["Error"]["Message"], raised.value


def test_malformed_requests(server: ThreadServer, client: Any) -> None:
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    r = server.client.post(
        "/aws", content=b"{}", headers={**headers, "X-Amz-Target": TARGET + "StartTextTranslationJob"}
    )
    assert (r.status_code, r.json()["__type"]) == (400, "UnknownOperationException")
    r = server.client.post("/aws/", content=b"[", headers={**headers, "X-Amz-Target": TARGET + "TranslateText"})
    assert (r.status_code, r.json()["__type"]) == (400, "SerializationException")
    for terms, message in ((b"en\nword\n", "two or more"), (b"en,en\na,b\n", "distinct"), (b"en,de\n", "at least one")):
        with pytest.raises(ClientError) as raised:
            client.import_terminology(
                Name="bad", MergeStrategy="OVERWRITE", TerminologyData={"File": terms, "Format": "CSV"}
            )
        assert _code(raised) == (400, "InvalidParameterValueException") and message in str(raised.value)
    with pytest.raises(ClientError) as raised:
        client.import_terminology(
            Name="bad__name", MergeStrategy="OVERWRITE", TerminologyData={"File": b"en,de\na,b", "Format": "CSV"}
        )
    assert _code(raised) == (400, "InvalidParameterValueException")
    many = "en,de\n" + "".join(f"term{i},Begriff{i}\n" for i in range(1001))
    with pytest.raises(ClientError) as raised:
        client.import_terminology(
            Name="many", MergeStrategy="OVERWRITE", TerminologyData={"File": many.encode(), "Format": "CSV"}
        )
    assert _code(raised) == (400, "LimitExceededException") and "1001 terms" in str(raised.value)
    long = f"en,de\n{'x' * 201},y\n"
    with pytest.raises(ClientError) as raised:
        client.import_terminology(
            Name="long", MergeStrategy="OVERWRITE", TerminologyData={"File": long.encode(), "Format": "CSV"}
        )
    assert _code(raised) == (400, "InvalidParameterValueException") and "200" in str(raised.value)
    with pytest.raises(ClientError) as raised:
        client.list_languages(DisplayLanguageCode="de")
    assert _code(raised) == (400, "UnsupportedDisplayLanguageCodeException")


def test_the_key_is_the_access_key_id_and_terminology_links_are_signed(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    with thread_server(settings_for(bundle, api_key="k3y"), FakeLoader()) as s:
        for key, status, code in (("wrong", 400, "UnrecognizedClientException"),):
            with pytest.raises(ClientError) as raised:
                _client(s.url, key).translate_text(Text="a b", SourceLanguageCode="en", TargetLanguageCode="de")
            assert _code(raised) == (status, code)
        r = s.client.post("/aws", content=b"{}", headers={"X-Amz-Target": TARGET + "ListLanguages"})
        assert (r.status_code, r.json()["__type"]) == (403, "MissingAuthenticationTokenException")
        right = _client(s.url, "k3y")
        assert right.translate_text(Text="a b", SourceLanguageCode="en", TargetLanguageCode="de")["TranslatedText"] == (
            "b a"
        )
        right.import_terminology(
            Name="t", MergeStrategy="OVERWRITE", TerminologyData={"File": b"en,de\na,b\n", "Format": "CSV"}
        )
        link = right.get_terminology(Name="t")["TerminologyDataLocation"]["Location"]
        with urllib.request.urlopen(link) as answer:  # signed: no key needed
            assert answer.read() == b"en,de\na,b\n"
        for tampered in (link[:-1] + ("0" if link[-1] != "0" else "1"), link.replace("expires=", "expires=1")):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(tampered)
            assert refused.value.code == 403
        expired = s.client.get(f"/aws/terminology/t.csv?expires={int(time.time()) - 1}&signature=00")
        assert expired.status_code == 403
        assert s.client.get("/aws/terminology/t.csv", headers={"X-API-Key": "k3y"}).text == "en,de\na,b\n"


def test_the_body_of_a_document_is_bounded(client: Any) -> None:
    big = base64.b64encode(b"x" * (100 * 1024 + 1))
    with pytest.raises(ClientError) as raised:
        client.translate_document(
            Document={"Content": base64.b64decode(big), "ContentType": "text/plain"},
            SourceLanguageCode="en",
            TargetLanguageCode="de",
        )
    assert _code(raised) == (400, "LimitExceededException")


def test_a_terminology_link_works_on_every_replica_that_shares_the_glossary_directory(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "en-de")
    shared = tmp_path / "glossaries"
    settings = settings_for(bundle, glossary_dir=shared, api_key="k3y")
    with thread_server(settings, FakeLoader()) as first, thread_server(settings, FakeLoader()) as second:
        _client(first.url, "k3y").import_terminology(
            Name="t", MergeStrategy="OVERWRITE", TerminologyData={"File": b"en,de\na,b\n", "Format": "CSV"}
        )
        link = _client(first.url, "k3y").get_terminology(Name="t")["TerminologyDataLocation"]["Location"]
        other = link.replace(first.url, second.url)  # the next request of a client behind a Service: another pod
        assert second.client.get(other.removeprefix(second.url)).text == "en,de\na,b\n"
        # signed with the directory's secret, not the process's (both servers here share one process)
        query = dict(part.split("=") for part in link.split("?", 1)[1].split("&"))
        secret = bytes.fromhex((shared / ".link-secret").read_text())
        expected = hmac.new(secret, f"t\n{query['expires']}".encode(), hashlib.sha256).hexdigest()
        assert query["signature"] == expected
