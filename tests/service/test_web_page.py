"""End to end: the web page at ``/`` in headless Chromium against ``python -m service`` on the tiny bundle.

Drives Debian's ``chromium`` through its ``chromedriver`` with Selenium (no browser download: the driver's
path is given, so Selenium Manager is never asked). Skips, saying why, only when no browser or driver binary
is installed; ``.ci/run`` installs both. Screenshots go to ``artifacts/`` under the repository root.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from testkit.fake_engine import write_fake_bundle
from tests.service.servers import ROOT, ProcessServer, process_server, wait_until

MAX_CHARS = 200
SENTENCE = "red blue green"
TWO_SENTENCES = "white black navy. gold pink"
ARTIFACTS = ROOT / "artifacts"
WAIT_S = 60


def _first_executable(*candidates: str) -> str | None:
    for candidate in candidates:
        found = shutil.which(candidate)
        if found:
            return found
    return None


CHROMIUM = _first_executable("chromium", "chromium-browser", "/usr/bin/chromium")
CHROMEDRIVER = _first_executable("chromedriver", "/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason=f"headless browser test needs Debian's chromium and chromium-driver (apt-get install chromium "
        f"chromium-driver; .ci/run installs them): chromium={CHROMIUM}, chromedriver={CHROMEDRIVER}",
    ),
]

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",  # no network: every other host is unknown
]


@pytest.fixture(scope="module")
def server(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    log = tmp_path_factory.mktemp("web") / "server.log"
    args = ["--bundle", str(tiny_bundle), "--provider", "cpu", "--max-wait-ms", "5"]
    env = {"MT_MAX_CHARS": str(MAX_CHARS), "MT_THREADS": "1"}
    with process_server(args, log, env=env) as running:
        wait_until(lambda: running.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        yield running


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")  # belt and braces: the driver path given, Selenium Manager is not run
        driver = webdriver.Chrome(options=options, service=ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(browser: WebDriver, server: ProcessServer) -> None:
    browser.get(server.url + "/")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_element(By.ID, "model-name").get_attribute("data-state") == "ready",
        "the page never showed the model as ready",
    )
    browser.get_log("browser")  # start each test with an empty console log


def set_field(browser: WebDriver, element_id: str, value: str) -> None:
    field = browser.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(value)


def submit(browser: WebDriver) -> None:
    browser.find_element(By.ID, "translate-button").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda d: (
            d.find_element(By.ID, "translate-button").is_enabled()
            and (d.find_element(By.ID, "result").is_displayed() or d.find_element(By.ID, "error").is_displayed())
        ),
        "neither a translation nor an error appeared",
    )


def screenshot(browser: WebDriver, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot in tmp_path, copied to artifacts/ (gitignored)."""
    height = int(
        browser.execute_script(
            "window.scrollTo(0, 0);"
            "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight;"
        )
    )
    browser.set_window_size(1280, max(1000, min(height, 8000)))
    shot = tmp_path / name
    assert browser.save_screenshot(str(shot)), "chromium took no screenshot"
    assert shot.stat().st_size > 10_000
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / name)
    browser.set_window_size(1280, 1000)
    return ARTIFACTS / name


def severe_console_messages(browser: WebDriver) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


HEATMAPS_JS = """
return [...document.querySelectorAll('#attention-views table.heatmap')].map((table) => ({
  unit: table.dataset.unit,
  rows: table.tBodies[0].rows.length,
  cellsPerRow: [...table.tBodies[0].rows].map((tr) => tr.querySelectorAll('td.cell').length),
  weights: [...table.tBodies[0].rows].map(
    (tr) => [...tr.querySelectorAll('td.cell')].map((td) => Number(td.dataset.weight))),
  dataRows: Number(table.dataset.rows),
  dataCols: Number(table.dataset.cols),
  sourceLabels: [...table.tHead.querySelectorAll('th.source-label')].map((th) => th.textContent),
  targetLabels: [...table.tBodies[0].querySelectorAll('th.target-label')].map((th) => th.textContent),
  widthShare: table.getBoundingClientRect().width / table.closest('.sentence-view').getBoundingClientRect().width,
}));
"""

WORD_START = "\u2581"


def word_groups(pieces: list[str]) -> list[list[int]]:
    """Piece indexes of each word: a word starts at a piece with sentencepiece's U+2581 (or at the first)."""
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if i == 0 or piece.startswith(WORD_START):
            groups.append([])
        groups[-1].append(i)
    return groups


def flat(rows: list[list[float]]) -> list[float]:
    return [w for row in rows for w in row]


def word_grid(attention: dict[str, Any]) -> tuple[list[str], list[str], list[list[float]]]:
    """Target words, source words and word-to-word weights: a source word's pieces summed, a target
    word's pieces averaged, so each row still sums to one."""
    src, tgt = word_groups(attention["source_tokens"]), word_groups(attention["target_tokens"])
    text = lambda pieces, group: "".join(pieces[i] for i in group).replace(WORD_START, "")  # noqa: E731
    weights = [[sum(attention["weights"][t][s] for t in tg for s in sg) / len(tg) for sg in src] for tg in tgt]
    return (
        [text(attention["target_tokens"], g) for g in tgt],
        [text(attention["source_tokens"], g) for g in src],
        weights,
    )


def test_page_translates_and_shows_heatmaps_alignment_and_alternatives(
    browser: WebDriver, server: ProcessServer, tmp_path: Path
) -> None:
    open_page(browser, server)
    model = server.client.get("/model").json()
    assert f"{model['name']} {model['version']}" in browser.find_element(By.ID, "model-name").text

    set_field(browser, "source", TWO_SENTENCES)
    set_field(browser, "beam-size", "4")
    set_field(browser, "n-best", "2")
    submit(browser)
    assert not browser.find_element(By.ID, "error").is_displayed(), browser.find_element(By.ID, "error").text

    request: dict[str, Any] = {
        "text": TWO_SENTENCES,
        "beam_size": 4,
        "n_best": 2,
        "return_attention": True,
        "return_scores": True,
        "split_sentences": True,
    }
    r = server.client.post("/translate", json=request)
    assert r.status_code == 200, r.text
    expected = r.json()["translations"][0]

    assert browser.find_element(By.ID, "translation").text == expected["text"].strip()
    assert re.fullmatch(r"\d+ ms", browser.find_element(By.ID, "timing").text)
    assert browser.find_element(By.ID, "result-model").text == f"{model['name']} {model['version']}"

    alternatives = browser.find_elements(By.CSS_SELECTOR, "#alternatives li.alternative:not(.none)")
    assert alternatives[0].find_element(By.CLASS_NAME, "alt-text").text == expected["text"].strip()
    assert len(alternatives) == 1 + len(expected.get("alternatives", []))
    for item in alternatives:
        float(item.find_element(By.CLASS_NAME, "alt-score").text)  # a number is shown with each

    sentences = expected["sentences"]
    assert len(sentences) == 2, "the test text should split into two sentences"
    heatmaps = browser.execute_script(HEATMAPS_JS)
    assert len(heatmaps) == len(sentences), "one heatmap per sentence"
    # by default the axes are words, and the table spreads over the width it has
    for shown, sentence in zip(heatmaps, sentences, strict=True):
        target_words, source_words, weights = word_grid(sentence["attention"])
        rows, cols = len(target_words), len(source_words)
        assert rows > 0 and cols > 0
        assert shown["unit"] == "words"
        assert (shown["rows"], shown["dataRows"], shown["dataCols"]) == (rows, rows, cols)
        assert shown["cellsPerRow"] == [cols] * rows
        assert shown["sourceLabels"] == source_words
        assert shown["targetLabels"] == target_words
        assert flat(shown["weights"]) == pytest.approx(flat(weights), abs=1e-6)
        assert all(sum(row) == pytest.approx(1.0, abs=0.02) for row in shown["weights"])
        assert shown["widthShare"] > 0.9, f"the heatmap uses {shown['widthShare']:.0%} of the panel's width"

    # the sub-word pieces, as the model sees them, one click away
    browser.find_element(By.CSS_SELECTOR, 'label[for="heatmap-pieces"]').click()
    heatmaps = browser.execute_script(HEATMAPS_JS)
    for shown, sentence in zip(heatmaps, sentences, strict=True):
        attention = sentence["attention"]
        rows, cols = len(attention["target_tokens"]), len(attention["source_tokens"])
        assert shown["unit"] == "pieces"
        assert (shown["rows"], shown["dataRows"], shown["dataCols"]) == (rows, rows, cols)
        assert shown["cellsPerRow"] == [cols] * rows
        assert shown["sourceLabels"] == attention["source_tokens"]
        assert shown["targetLabels"] == attention["target_tokens"]
        assert flat(shown["weights"]) == pytest.approx(flat(attention["weights"]), abs=1e-6)
    browser.find_element(By.CSS_SELECTOR, 'label[for="heatmap-words"]').click()
    assert browser.execute_script(HEATMAPS_JS)[0]["unit"] == "words"

    # the copy button puts the translation on the clipboard
    origin = server.url.rstrip("/")
    browser.execute_cdp_cmd(  # one call: each call replaces the origin's grants
        "Browser.grantPermissions",
        {"permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"], "origin": origin},
    )
    browser.find_element(By.ID, "copy-button").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "copy-status").text == "Copied")
    clipboard = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "navigator.clipboard.readText().then(done, (err) => done('error: ' + err));"
    )
    assert clipboard == expected["text"]

    # hovering the first target word highlights the source words the server aligned it to
    first = sentences[0]
    linked = sorted({link["source"] for link in first["alignment"] if link["target"] == 0})
    view = browser.find_element(By.CSS_SELECTOR, '.sentence-view[data-sentence="0"]')
    target_word = view.find_element(By.CSS_SELECTOR, '.target-word[data-word="0"]')
    ActionChains(browser).move_to_element(target_word).perform()
    WebDriverWait(browser, 10).until(lambda d: "active" in (target_word.get_attribute("class") or ""))
    highlighted = [int(w.get_attribute("data-word") or -1) for w in view.find_elements(By.CSS_SELECTOR, ".linked")]
    assert sorted(highlighted) == linked
    ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    WebDriverWait(browser, 10).until(lambda d: not view.find_elements(By.CSS_SELECTOR, ".linked"))

    # the keyboard does the same: focus shows the links (and stays for the screenshot)
    browser.execute_script("window.scrollTo(0, 0); arguments[0].focus({preventScroll: true});", target_word)
    focused = [int(w.get_attribute("data-word") or -1) for w in view.find_elements(By.CSS_SELECTOR, ".linked")]
    assert sorted(focused) == linked

    assert severe_console_messages(browser) == []
    path = screenshot(browser, tmp_path, "web-page.png")
    print(f"screenshot: {path}")


def test_page_shows_readable_errors(browser: WebDriver, server: ProcessServer, tmp_path: Path) -> None:
    open_page(browser, server)
    error = browser.find_element(By.ID, "error")

    set_field(browser, "source", "red " * (MAX_CHARS // 4 + 1))
    submit(browser)
    assert error.is_displayed()
    assert error.get_attribute("data-code") == "too_large"
    assert error.get_attribute("data-status") == "413"
    assert "too long" in browser.find_element(By.ID, "error-title").text
    assert f"the limit is {MAX_CHARS}" in browser.find_element(By.ID, "error-message").text
    screenshot(browser, tmp_path, "web-page-error.png")

    set_field(browser, "source", SENTENCE)
    set_field(browser, "beam-size", "1")
    set_field(browser, "n-best", "3")
    submit(browser)
    assert error.is_displayed()
    assert error.get_attribute("data-code") == "validation"
    assert "n_best" in browser.find_element(By.ID, "error-message").text

    set_field(browser, "n-best", "1")
    submit(browser)  # a good request afterwards clears the error
    assert not error.is_displayed()
    expected = server.client.post("/translate", json={"text": SENTENCE, "beam_size": 1}).json()
    assert browser.find_element(By.ID, "translation").text == expected["translations"][0]["text"]


def test_page_sends_a_glossary_and_refuses_a_line_it_cannot_read(browser: WebDriver, server: ProcessServer) -> None:
    """Options › More › Glossary: "term = translation" (or a tab) a line becomes the request's glossary, and the
    page shows what the server answers for it; a line without "=" is refused on the page, nothing sent."""
    open_page(browser, server)
    browser.execute_script(
        "window.sentBodies = []; const send = window.fetch;"
        "window.fetch = (url, init) => { if (init && init.body) window.sentBodies.push(JSON.parse(init.body));"
        " return send(url, init); };"
    )
    browser.find_element(By.CSS_SELECTOR, "details.advanced summary").click()
    glossary = browser.find_element(By.ID, "glossary")
    set_field(browser, "source", SENTENCE)
    set_value = "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));"
    try:
        browser.execute_script(set_value, glossary, "blue = azure\n\n  red\tcrimson ")
        submit(browser)
        sent = browser.execute_script("return window.sentBodies;")
        assert sent[-1]["glossary"] == {"blue": "azure", "red": "crimson"}
        terms = {"text": SENTENCE, "glossary": {"blue": "azure", "red": "crimson"}}
        expected = server.client.post("/translate", json=terms).json()["translations"][0]["text"]
        assert browser.find_element(By.ID, "translation").text == expected

        browser.execute_script(set_value, glossary, "blue = azure\nred crimson")
        browser.find_element(By.ID, "translate-button").click()
        error = browser.find_element(By.ID, "error")
        WebDriverWait(browser, WAIT_S).until(lambda d: error.is_displayed(), "the glossary's line was not refused")
        assert error.get_attribute("data-code") == "glossary"
        assert 'Line 2 ("red crimson")' in browser.find_element(By.ID, "error-message").text
        assert len(browser.execute_script("return window.sentBodies;")) == len(sent)
    finally:
        browser.execute_script(set_value, glossary, "")


def test_page_translates_a_file_and_offers_it_for_download(
    browser: WebDriver, server: ProcessServer, tmp_path: Path
) -> None:
    """Translate a file: the chosen file goes to /translate/document and comes back as a download under its own
    name, holding what the API answers for it; a kind the server does not take shows the server's error."""
    from core.documents import KINDS

    open_page(browser, server)
    field = browser.find_element(By.ID, "file")
    assert sorted(field.get_attribute("accept").split(",")) == sorted(KINDS)  # what the server takes, no more
    path = tmp_path / "colors.txt"
    path.write_text(f"{SENTENCE}\n\n{TWO_SENTENCES}\n", encoding="utf-8")
    field.send_keys(str(path))
    browser.find_element(By.ID, "file-button").click()
    result = browser.find_element(By.ID, "file-result")
    WebDriverWait(browser, WAIT_S).until(lambda d: result.is_displayed(), "no download was offered")
    link = browser.find_element(By.ID, "file-link")
    assert link.get_attribute("download") == "colors.txt"
    fetch = "const done = arguments[arguments.length - 1]; fetch(arguments[0]).then(r => r.text()).then(done);"
    downloaded = browser.execute_async_script(fetch, link.get_attribute("href"))
    expected = server.client.post("/translate/document", files={"file": ("colors.txt", path.read_bytes())})
    assert downloaded == expected.text and downloaded.count("\n") == 3
    assert "Translated in" in browser.find_element(By.ID, "file-status").text

    other = tmp_path / "book.mobi"
    other.write_bytes(b"BOOKMOBI")
    field.clear()
    field.send_keys(str(other))
    browser.find_element(By.ID, "file-button").click()
    error = browser.find_element(By.ID, "error")
    WebDriverWait(browser, WAIT_S).until(lambda d: error.is_displayed(), "the e-book was not refused")
    assert error.get_attribute("data-code") == "unsupported_format" and not result.is_displayed()
    assert ".docx" in browser.find_element(By.ID, "error-message").text


def test_page_offers_the_language_pairs_served(browser: WebDriver, tmp_path: Path) -> None:
    """Two models in one server: the selector lists both pairs from /languages, and the one chosen is the
    model that answers."""
    en_de = write_fake_bundle(tmp_path / "en-de", name="fake-en-de", languages="en-de", prefix="de:")
    de_en = write_fake_bundle(tmp_path / "de-en", name="fake-de-en", languages="de-en", prefix="en:")
    with process_server(["--bundles", f"{en_de},{de_en}"], tmp_path / "server.log", fake=True) as two:
        wait_until(lambda: two.client.get("/readyz").status_code == 200, what="ready")
        open_page(browser, two)
        select = Select(browser.find_element(By.ID, "pair"))
        assert [o.text for o in select.options] == ["English → German", "German → English"]
        assert browser.find_element(By.ID, "model-name").get_attribute("data-name") == "fake-en-de"
        select.select_by_visible_text("German → English")
        WebDriverWait(browser, 10).until(
            lambda d: d.find_element(By.ID, "model-name").get_attribute("data-name") == "fake-de-en"
        )
        set_field(browser, "source", "eins zwei")
        submit(browser)
        assert browser.find_element(By.ID, "translation").text == "en:zwei eins"
        assert browser.find_element(By.ID, "result-model").text == "fake-de-en 1"
        assert browser.find_element(By.ID, "source").get_attribute("lang") == "de"
        assert severe_console_messages(browser) == []


REDOCLY_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
RESOURCES_JS = "return performance.getEntriesByType('resource').map((entry) => entry.name);"


@pytest.mark.parametrize(("path", "rendered"), [("/docs", ".swagger-ui .info .title"), ("/redoc", ".api-info h1")])
def test_api_docs_render_with_the_network_off(
    browser: WebDriver, server: ProcessServer, path: str, rendered: str
) -> None:
    """Swagger UI and ReDoc come from the server itself: with every host but 127.0.0.1 unresolvable, both
    render the API's title and its /translate operation, and load nothing from elsewhere."""
    browser.get(server.url + path)
    WebDriverWait(browser, WAIT_S).until(
        lambda d: "Translation service" in " ".join(e.text for e in d.find_elements(By.CSS_SELECTOR, rendered)),
        f"{path} never rendered the API's title",
    )
    WebDriverWait(browser, WAIT_S).until(lambda d: "/translate" in d.find_element(By.TAG_NAME, "body").text)
    loaded = browser.execute_script(RESOURCES_JS)
    assert any(url.endswith("/openapi.json") for url in loaded), loaded
    # ReDoc's side menu always asks for Redocly's logo; offline the image removes itself (its onError)
    assert [url for url in loaded if not url.startswith(server.url) and url != REDOCLY_LOGO] == []
    assert [m for m in severe_console_messages(browser) if REDOCLY_LOGO not in m] == []


def test_page_translates_html_and_shows_it_as_markup_text(browser: WebDriver, server: ProcessServer) -> None:
    markup = "<p>red <b>blue</b> green</p>"
    open_page(browser, server)
    Select(browser.find_element(By.ID, "format")).select_by_value("html")
    set_field(browser, "source", markup)
    submit(browser)
    assert not browser.find_element(By.ID, "error").is_displayed(), browser.find_element(By.ID, "error").text
    expected = server.client.post("/translate", json={"text": markup, "format": "html"}).json()
    shown = browser.find_element(By.ID, "translation")
    assert shown.text == expected["translations"][0]["text"]  # the markup as text, never rendered
    assert shown.find_elements(By.TAG_NAME, "b") == []
    assert not browser.find_element(By.ID, "attention-block").is_displayed()
    Select(browser.find_element(By.ID, "format")).select_by_value("text")
