"""End to end: ``python -m service`` on a real tiny bundle (onnxruntime), through real HTTP.

The bundle comes from the session fixture ``tiny_bundle`` (tests/conftest.py); these tests skip,
saying why, only while that fixture or the engine cannot be built yet.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.service.servers import ProcessServer, process_server, wait_until

TOKEN = "real-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
TEXTS = ["red blue green", "gold pink", "white black navy teal", "cyan", "plum gray red", "blue"]
NO_CACHE = ["--cache-mb", "0"]
"""These servers decode every sentence they are sent: the tests here send the same ones again to see how they are
decoded (batched, admitted mid-run, ...), which the translation cache would answer without decoding."""


@pytest.fixture(scope="module")
def real_bundle(request: pytest.FixtureRequest) -> Path:
    try:
        import inference.engine  # noqa: F401
    except ImportError as err:
        pytest.skip(f"inference.engine cannot be imported yet: {err}")
    try:
        bundle = request.getfixturevalue("tiny_bundle")
    except pytest.FixtureLookupError:
        pytest.skip("the tiny_bundle fixture is not defined yet (tests/conftest.py)")
    except (Exception, pytest.fail.Exception) as err:  # its build failed (or timed out)
        pytest.skip(f"the tiny_bundle fixture could not be built: {type(err).__name__}: {err}")
    return Path(bundle)


@pytest.fixture(scope="module")
def real(real_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    log = tmp_path_factory.mktemp("real") / "server.log"
    args = ["--bundle", str(real_bundle), "--max-wait-ms", "150", "--provider", "cpu"]
    env = {"MT_ADMIN_TOKEN": TOKEN, "MT_THREADS": "1"}
    with process_server([*args, *NO_CACHE], log, env=env) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        yield server


def translate(server: ProcessServer, text: str | list[str], **options: Any) -> dict[str, Any]:
    r = server.client.post("/translate", json={"text": text, **options})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def metric(server: ProcessServer, name: str) -> float:
    for line in server.client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def test_serves_the_bundle_without_torch(real: ProcessServer, real_bundle: Path) -> None:
    model = real.client.get("/model").json()
    manifest = json.loads((real_bundle / "manifest.json").read_text(encoding="utf-8"))
    assert (model["name"], model["version"]) == (manifest["name"], manifest["version"])
    assert model["provider"] == "CPUExecutionProvider"
    assert model["manifest"]["architecture"] == manifest["architecture"]
    maps = Path(f"/proc/{real.process.pid}/maps")
    if maps.exists():
        assert "libtorch" not in maps.read_text(), "the service process loaded torch"


def test_the_translation_cache_answers_sentences_sent_again_as_they_were_decoded(
    real: ProcessServer, real_bundle: Path, tmp_path: Path
) -> None:
    """The cache on (the default) with a real engine: sentences sent again come from it, as the first time (and as
    the cache-less server gives them alone); attention and n-best are entries of their own, decoded once each."""
    args = ["--bundle", str(real_bundle), "--provider", "cpu"]
    with process_server(args, tmp_path / "cache.log", env={"MT_THREADS": "1"}) as cached:
        wait_until(lambda: cached.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        name = cached.client.get("/model").json()["name"]
        first = [translate(cached, t)["translations"][0]["text"] for t in TEXTS]
        assert first == [translate(real, t)["translations"][0]["text"] for t in TEXTS]
        again = [t["text"] for t in translate(cached, TEXTS)["translations"]]
        assert again == first
        assert metric(cached, f'mt_cache_sentences_total{{model="{name}",result="hit"}}') == len(TEXTS)
        detailed = [translate(cached, TEXTS[2], return_attention=True, n_best=2, return_scores=True) for _ in "ab"]
        assert detailed[0] == detailed[1] and len(detailed[0]["translations"][0]["alternatives"]) == 1
        assert metric(cached, f'mt_cache_sentences_total{{model="{name}",result="miss"}}') == len(TEXTS) + 1
        assert metric(cached, f'mt_translated_sentences_total{{model="{name}"}}') == len(TEXTS) + 1


def burst(server: ProcessServer, texts: list[str]) -> list[str]:
    """``texts`` sent at once, one request each, from threads released together by a barrier."""
    start = threading.Barrier(len(texts))

    def one(text: str) -> str:
        start.wait(timeout=30)
        return str(translate(server, text)["translations"][0]["text"])

    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(one, texts))


def concurrently_until_mid_run(server: ProcessServer, texts: list[str], rounds: int = 3) -> tuple[list[str], float]:
    """``texts`` translated by 8 client threads, again (up to ``rounds`` rounds) while no request joined a running set
    mid-run: on a loaded machine a round's requests may each be decoded before the next one arrives. The last
    round's translations and the server's mid-run admissions."""
    for _ in range(rounds):
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda t: translate(server, t)["translations"][0]["text"], texts))
        mid_run = metric(server, "mt_admitted_mid_run_sentences_total")
        if mid_run > 0:
            break
    return together, mid_run


def test_translates_and_batches_concurrent_requests_like_single_ones(real: ProcessServer) -> None:
    # engine calls (whole batches, or steps of a running set with the continuous scheduler, the default) and the
    # sentences they carried: together, a burst's calls carry more than one sentence each on average. The
    # continuous scheduler admits a request at the next step without waiting for others, so on a loaded machine a
    # burst's requests can arrive one after another, each decoded before the next: a few bursts get their chance
    # (a scheduler that never decodes requests together fails every one)
    texts = TEXTS * 4
    seen = []
    for _ in range(4):
        calls_before = metric(real, "mt_batch_size_sentences_count")
        carried_before = metric(real, "mt_batch_size_sentences_sum")
        together = burst(real, texts)
        calls = metric(real, "mt_batch_size_sentences_count") - calls_before
        carried = metric(real, "mt_batch_size_sentences_sum") - carried_before
        alone = [translate(real, t)["translations"][0]["text"] for t in TEXTS]
        assert together == alone * 4
        seen.append((carried, calls))
        if carried > calls:
            break
    assert carried > calls, f"no burst was decoded together (sentences, calls per burst: {seen})"
    assert "scheduler: continuous batching (auto)" in real.log()  # the default, on the CPU too
    assert all(isinstance(t, str) and t for t in alone)
    assert alone[0] == "GREEN BLUE RED"  # the tiny model learned to reverse and capitalise


def test_no_repeat_ngram_size_reaches_the_search(real: ProcessServer, real_bundle: Path) -> None:
    from core.translation import DEFAULT_LENGTH_PENALTY, DecodeOptions
    from inference.engine import Engine

    engine = Engine.load(real_bundle, provider="cpu", threads=1)
    text = "gold gold gold gold gold gold gold gold"
    got = {}
    for n in (0, 1):
        body = translate(real, text, no_repeat_ngram_size=n, split_sentences=False, return_scores=True)
        expected = engine.translate(
            [text], DecodeOptions(length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=n)
        )[0].best
        assert body["translations"][0]["text"] == expected.text
        got[n] = expected.pieces
    assert len(set(got[1])) == len(got[1]), got[1]
    assert got[0] != got[1], "the tiny model repeats pieces on this input; the guard must change that"


def test_sentences_and_layout_survive(real: ProcessServer) -> None:
    out = translate(real, "red blue\n\ngold pink  ")["translations"][0]["text"]
    first, second = out.split("\n\n")
    assert second.endswith("  ")
    assert first == translate(real, "red blue")["translations"][0]["text"]


def test_a_sentence_in_capitals_is_read_folded_and_answered_in_capitals(real: ProcessServer, real_bundle: Path) -> None:
    """core/casing.py through HTTP: the sentence in capitals is translated as its folded form would be, then put in
    capitals; the one in lower case beside it is translated as it is."""
    from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
    from inference.engine import Engine

    engine = Engine.load(real_bundle, provider="cpu", threads=1)
    options = DecodeOptions(length_penalty=DEFAULT_LENGTH_PENALTY, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE)
    folded, plain = engine.translate_ids(
        [engine.tokenizer.encode_source(t) for t in ("Gold pink", "gold pink")], options
    )
    out = translate(real, "GOLD PINK\ngold pink")["translations"][0]["text"]
    assert out == f"{folded.best.text.upper()}\n{plain.best.text}"
    assert engine.tokenizer.encode_source("GOLD PINK") != engine.tokenizer.encode_source("Gold pink")


def test_a_long_sentence_is_answered_in_parts_as_evaluate_bundle_scores_it(
    real: ProcessServer, real_bundle: Path, tmp_path: Path
) -> None:
    """A sentence of more than MT_PART_PIECES pieces: the server translates it in parts, and `evaluate-bundle`
    (another code path, training/evaluate.py) writes the same translation, so its BLEU is the server's; a line of two
    sentences, too (both cut it into sentences)."""
    from training.evaluate import evaluate_bundle

    words = ["red", "blue", "gold", "navy", "pink", "teal", "plum"]
    line = " ".join(words[i % len(words)] for i in range(90))
    two = "red blue gold navy. Pink teal plum gold!"
    (tmp_path / "long.tsv").write_text(f"{line}\tx\n{two}\tx\n", encoding="utf-8")
    evaluate_bundle(real_bundle, [tmp_path / "long.tsv"], hypotheses_dir=tmp_path, threads=1)
    served = translate(real, line)["translations"][0]
    written = (tmp_path / "long.hyp").read_text(encoding="utf-8").splitlines()
    assert [served["text"], translate(real, two)["translations"][0]["text"]] == written
    assert "truncated" not in served
    whole = translate(real, line[: len(line) // 3])["translations"][0]["text"]  # 30 words: one part
    assert served["text"] != whole and len(served["text"].split()) > len(whole.split())


def test_attention_alignment_scores_and_alternatives(real: ProcessServer) -> None:
    body = translate(
        real,
        "white black navy",
        return_attention=True,
        return_scores=True,
        beam_size=4,
        n_best=2,
    )
    t = body["translations"][0]
    attention = t["attention"]
    rows, cols = len(attention["target_tokens"]), len(attention["source_tokens"])
    assert rows > 0 and cols > 0
    assert len(attention["weights"]) == rows
    for row in attention["weights"]:
        assert len(row) == cols
        assert sum(row) == pytest.approx(1.0, abs=1e-2)
    for link in t["alignment"]:
        assert 0 <= link["target"] and 0 <= link["source"]
        assert link["target_word"] and link["source_word"]
    assert t["score"] <= 0
    assert "sentences" not in t  # one sentence: its attention is the text's, not sent twice
    for alternative in t.get("alternatives", []):
        assert alternative["score"] <= t["score"] + 1e-6


def test_promtool_accepts_real_metrics(real: ProcessServer) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH (Debian package 'prometheus'; CI installs it)")
    text = real.client.get("/metrics").text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_reload_switches_to_a_good_bundle_and_keeps_it_over_a_corrupt_one(
    real: ProcessServer, real_bundle: Path, tmp_path: Path
) -> None:
    good = Path(shutil.copytree(real_bundle, tmp_path / "good"))
    manifest = json.loads((good / "manifest.json").read_text(encoding="utf-8"))
    manifest["version"] = "reloaded"
    (good / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    r = real.client.post("/admin/reload", json={"bundle": str(good)}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["model"]["version"] == "reloaded"
    assert translate(real, "red blue")["model"]["version"] == "reloaded"

    corrupt = Path(shutil.copytree(real_bundle, tmp_path / "corrupt"))
    decoder = corrupt / manifest["graphs"]["decoder"]["file"]
    data = bytearray(decoder.read_bytes())
    data[len(data) // 2] ^= 0xFF
    decoder.write_bytes(bytes(data))
    r = real.client.post("/admin/reload", json={"bundle": str(corrupt)}, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert "sha256" in r.json()["message"] and "still serving" in r.json()["message"]
    after = translate(real, "red blue")
    assert after["model"]["version"] == "reloaded"
    assert after["translations"][0]["text"]


def test_continuous_scheduler_serves_staggered_requests_like_single_ones(
    real: ProcessServer, real_bundle: Path, tmp_path: Path
) -> None:
    """A real uvicorn process with --scheduler continuous on the tiny bundle: requests sent from 12 threads at
    once (later ones join running sets mid-run) get what the batch-scheduled server gives each alone."""
    import random
    import time

    log = tmp_path / "continuous.log"
    # one running set, open to arrivals at every step (not only once it has drained to the CPU's 2): every request
    # that arrives while it decodes joins it mid-run
    args = ["--bundle", str(real_bundle), "--scheduler", "continuous", "--provider", "cpu", "--inflight-batches", "1"]
    args += ["--refill-at", "1024"]
    rng = random.Random(3)
    texts = [" ".join(rng.choice(TEXTS).split() * rng.randint(1, 2)) for _ in range(48)]
    with process_server([*args, *NO_CACHE], log, env={"MT_THREADS": "1"}) as continuous:
        wait_until(lambda: continuous.client.get("/readyz").status_code == 200, timeout=60, what="ready")

        def send(i: int) -> str:
            time.sleep(rng.random() * 0.002)
            return str(translate(continuous, texts[i], return_scores=True)["translations"][0]["text"])

        with ThreadPoolExecutor(12) as pool:
            together = list(pool.map(send, range(len(texts))))
        mid_run = metric(continuous, "mt_admitted_mid_run_sentences_total")
    alone = [translate(real, t)["translations"][0]["text"] for t in texts]
    assert together == alone
    assert mid_run > 0, "no request joined a running set mid-run: the test did not test that"


def test_two_real_models_in_one_process_route_reload_and_speak_libretranslate_and_deepl(
    real: ProcessServer, real_bundle: Path, tiny_checkpoint: Path, tmp_path: Path
) -> None:
    """The tiny checkpoint exported a second time as a de->en model: one process serves both engines, routes by
    language, answers LibreTranslate's and DeepL's clients, and reloads one model while the other keeps translating."""
    import deepl
    from libretranslatepy import LibreTranslateAPI

    from training.export import export_bundle

    reverse = tmp_path / "tiny-de-en"
    export_bundle(tiny_checkpoint, reverse, name="tiny-de-en", version="1", source_language="de", target_language="en")
    alone = {t: translate(real, t)["translations"][0]["text"] for t in TEXTS}
    args = ["--bundles", f"{real_bundle},{reverse}", "--provider", "cpu"]
    with process_server(args, tmp_path / "two.log", env={"MT_ADMIN_TOKEN": TOKEN}) as two:
        wait_until(lambda: two.client.get("/readyz").status_code == 200, timeout=60, what="both models ready")
        pairs = [(p["source_lang"], p["target_lang"], p["model"]) for p in two.client.get("/languages").json()["pairs"]]
        assert pairs == [("en", "de", "tiny-reverse"), ("de", "en", "tiny-de-en")]
        for text in TEXTS[:3]:
            forward = translate(two, text, source_lang="en", target_lang="de")
            backward = translate(two, text, source_lang="de", target_lang="en")
            assert forward["model"]["name"] == "tiny-reverse" and backward["model"]["name"] == "tiny-de-en"
            assert forward["translations"][0]["text"] == backward["translations"][0]["text"] == alone[text]
        lt = LibreTranslateAPI(two.url + "/libretranslate/")
        assert lt.translate(TEXTS[0], "de", "en") == alone[TEXTS[0]]
        assert [language["code"] for language in lt.languages()] == ["en", "de"]
        dl = deepl.Translator("unused", server_url=two.url + "/deepl/")
        assert dl.translate_text(TEXTS[0], source_lang="DE", target_lang="EN-GB").text == alone[TEXTS[0]]

        def keep_translating(i: int) -> str:
            return str(translate(two, TEXTS[i % len(TEXTS)], target_lang="de")["translations"][0]["text"])

        with ThreadPoolExecutor(4) as pool:
            during = pool.map(keep_translating, range(24))
            r = two.client.post("/admin/reload", json={"model": "tiny-de-en"}, headers=ADMIN)
            assert r.status_code == 200, r.text
            assert list(during) == [alone[TEXTS[i % len(TEXTS)]] for i in range(24)]
        text = two.client.get("/metrics").text
        assert (
            'mt_model_reloads_total{model="tiny-de-en",result="success"} 1.0' in text
        )  # the start-up load is no reload
        assert 'mt_model_reloads_total{model="tiny-reverse",result="success"} 0.0' in text


def test_html_through_the_real_engine_keeps_valid_markup(real: ProcessServer) -> None:
    """The real engine's alignment places the tags: whatever it aligns, the markup stays whole and valid."""
    from tests.core.test_markup import inspect

    texts = [
        "<p>red <b>blue</b> green</p>",
        '<ul><li><a href="https://x.org/?a=1&amp;b=2">gold pink</a> white</li>'
        "<li>black <i>navy <em>teal</em></i></li></ul>",
        "<p>cyan <code>plum --gray</code> red</p><pre>blue  red</pre>",
    ]
    body = translate(real, texts, format="html")
    for source, out in zip(texts, (t["text"] for t in body["translations"]), strict=True):
        before, after = inspect(source), inspect(out)
        assert after.errors == [] and after.start_tags == before.start_tags, out
    assert "<code>plum --gray</code>" in body["translations"][2]["text"]
    assert body["translations"][2]["text"].endswith("<pre>blue  red</pre>")


def test_office_files_through_the_real_engine_keep_their_formatting(real: ProcessServer) -> None:
    """Whatever the real engine aligns, a Word file comes back whole: its paragraphs, one bold stretch on a word,
    the tab between two translated stretches."""
    import io

    docx = pytest.importorskip("docx")
    document = docx.Document()
    paragraph = document.add_paragraph("red ")
    paragraph.add_run("blue").bold = True
    paragraph.add_run(" green")
    document.add_paragraph("gold pink\twhite")
    saved = io.BytesIO()
    document.save(saved)
    r = real.client.post("/translate/document", files={"file": ("colors.docx", saved.getvalue())})
    assert r.status_code == 200, r.text
    out = docx.Document(io.BytesIO(r.content))
    expected = translate(real, "red blue green")["translations"][0]["text"]
    assert len(out.paragraphs) == 2 and out.paragraphs[0].text == expected
    bold = [run.text for run in out.paragraphs[0].runs if run.bold]
    assert len(bold) == 1 and bold[0].strip() in expected.split()
    assert out.paragraphs[1].text.count("\t") == 1 and out.paragraphs[1].text.strip("\t ")


def test_static_step_server_answers_like_the_default_one(
    real: ProcessServer, tiny_static_bundle: Path, tmp_path: Path
) -> None:
    """--static-step (what replays decoder steps as CUDA graphs on a GPU) on the CPU, with continuous batching
    and one thread pool for the process (--shared-pool; every static bucket opens a session of its own in it):
    concurrent requests joining running sets mid-run get what the default server gives each alone. The buckets of
    sets up to MT_STATIC_WARM sentences open before the server is ready: the requests open none."""
    args = ["--bundle", str(tiny_static_bundle), "--static-step", "--scheduler", "continuous", "--provider", "cpu"]
    args += ["--shared-pool", "--inflight-batches", "1", "--refill-at", "1024"]  # arrivals join at every step
    args += ["--static-warm", "8"]

    def opened(server: ProcessServer) -> dict[str, float]:
        return {kind: metric(server, f'mt_static_opened{{kind="{kind}"}}') for kind in ("decoder", "buffers")}

    with process_server([*args, *NO_CACHE], tmp_path / "static.log", env={"MT_THREADS": "2"}) as static:
        wait_until(lambda: static.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        warmed = opened(static)
        texts = [" ".join([t] * (1 + i % 3)) for i, t in enumerate(TEXTS * 4)] + ["GOLD PINK"]  # folded alike
        together, mid_run = concurrently_until_mid_run(static, texts)
        served = opened(static)
        captures = metric(static, "mt_cuda_graph_captures")
    assert together == [translate(real, t)["translations"][0]["text"] for t in texts]
    assert mid_run > 0, "no request joined a running set mid-run: the test did not test that"
    # every bucket of sets up to 8 sentences (4 slot counts x 4 source widths x 3 cache widths for the tiny
    # model's 128 positions), opened by the warm-up with buffers for each; the requests (8 at most at once) open
    # nothing more; no capture on a CPU
    assert warmed["decoder"] >= 4 * 4 * 3 and warmed["buffers"] >= warmed["decoder"] and captures == 0, warmed
    assert served == warmed
    assert metric(real, 'mt_static_opened{kind="decoder"}') == 0  # the default server opens none
    log = (tmp_path / "static.log").read_text()
    assert "static-shape steps" in log and "(one pool for the process)" in log
    assert "static steps: opened 48 buckets of up to 8 sentences" in log


@pytest.mark.parametrize(("static", "remote"), [(True, False), (False, False), (True, True)])
def test_a_server_with_lanes_answers_like_the_default_one(
    real: ProcessServer, tiny_static_bundle: Path, tmp_path: Path, static: bool, remote: bool
) -> None:
    """--lanes 2 with two running sets (--inflight-batches 2): each decoding thread steps on decoder sessions of its
    own, opened by the warm-up on each lane's thread before the server is ready, with --static-step every bucket of
    sets up to MT_STATIC_WARM sentences for both lanes; concurrent requests open no static session and get what the
    default server gives each alone; also with the engine in a process of its own (a GPU server's default)."""
    args = ["--bundle", str(tiny_static_bundle), "--scheduler", "continuous", "--provider", "cpu"]
    args += ["--inflight-batches", "2", "--lanes", "2", "--refill-at", "1024"]
    args += ["--static-step", "--static-warm", "8"] if static else []
    args += ["--engine-process"] if remote else []  # a GPU server's default: the engine in a process of its own

    def opened(server: ProcessServer) -> float:
        return metric(server, 'mt_static_opened{kind="decoder"}')

    with process_server([*args, *NO_CACHE], tmp_path / "lanes.log", env={"MT_THREADS": "2"}) as lanes:
        wait_until(lambda: lanes.client.get("/readyz").status_code == 200, timeout=90, what="ready")
        if remote and static:  # the engine process sends its counts every 0.2 s: wait for the warm-up's last ones
            wait_until(lambda: opened(lanes) >= 2 * 4 * 4 * 3, timeout=5, what="the engine process's counts")
        warmed = opened(lanes)
        texts = [" ".join([t] * (1 + i % 3)) for i, t in enumerate(TEXTS * 4)]
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda t: translate(lanes, t)["translations"][0]["text"], texts))
        if remote:
            time.sleep(1.0)  # what the requests opened is in the engine process's next counts
        served = opened(lanes)
    assert together == [translate(real, t)["translations"][0]["text"] for t in texts]
    # each lane's buckets of up to 8 sentences (the static test above); none without static steps
    assert warmed == served == (2 * 4 * 4 * 3 if static else 0)
    log = (tmp_path / "lanes.log").read_text()
    assert log.count("static steps: opened 48 buckets of up to 8 sentences") == (2 if static else 0), log[-3000:]


def test_masked_step_server_answers_like_the_default_one(
    real: ProcessServer, tiny_masked_bundle: Path, tmp_path: Path
) -> None:
    """--masked-step (the caches kept in place, read through a beam index: inference/clock_state.py) in a real
    server process with continuous batching: concurrent requests joining running sets mid-run get what the default
    server gives each alone."""
    args = ["--bundle", str(tiny_masked_bundle), "--masked-step", "--scheduler", "continuous", "--provider", "cpu"]
    args += ["--inflight-batches", "1", "--refill-at", "1024"]  # arrivals join at every step
    with process_server([*args, *NO_CACHE], tmp_path / "masked.log", env={"MT_THREADS": "2"}) as masked:
        wait_until(lambda: masked.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        texts = [" ".join([t] * (1 + i % 3)) for i, t in enumerate(TEXTS * 4)] + ["GOLD PINK"]
        together, mid_run = concurrently_until_mid_run(masked, texts)
    assert together == [translate(real, t)["translations"][0]["text"] for t in texts]
    assert mid_run > 0, "no request joined a running set mid-run: the test did not test that"


def test_an_engine_process_with_static_steps_opens_its_buckets_before_it_is_ready(
    real: ProcessServer, tiny_static_bundle: Path, tmp_path: Path
) -> None:
    """What a GPU server with MT_STATIC_STEP=1 runs (the engine process is on there by default): the engine process
    opens the buckets of sets up to MT_STATIC_WARM sentences on its decoding threads before the server is ready, and
    concurrent requests then open none, translated as the default server translates them."""
    args = ["--bundle", str(tiny_static_bundle), "--static-step", "--engine-process", "--scheduler", "continuous"]
    args += ["--provider", "cpu", "--inflight-batches", "1", "--refill-at", "1024", "--static-warm", "8"]

    def opened(server: ProcessServer) -> float:
        return metric(server, 'mt_static_opened{kind="decoder"}')

    with process_server([*args, *NO_CACHE], tmp_path / "static-ep.log", env={"MT_THREADS": "1"}) as static:
        wait_until(lambda: static.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        # The engine process sends its counts every 0.2 s, so the last ones before it was ready may predate the
        # warm-up's last bucket: wait for them to say all of them (before any request: only the warm-up opens any)
        wait_until(lambda: opened(static) >= 4 * 4 * 3, timeout=5, what="the engine process's counts")
        warmed = opened(static)
        texts = [" ".join([t] * (1 + i % 3)) for i, t in enumerate(TEXTS * 2)]
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda t: translate(static, t)["translations"][0]["text"], texts))
        time.sleep(1.0)  # the engine process sends its counts every 0.2 s: what the requests opened is in by now
        served = opened(static)
    assert together == [translate(real, t)["translations"][0]["text"] for t in texts]
    assert warmed == served == 4 * 4 * 3  # the buckets of up to 8 sentences of the tiny model (see the test above)


def test_engine_process_server_answers_like_the_default_one(
    real: ProcessServer, real_bundle: Path, tmp_path: Path
) -> None:
    """--engine-process (the models and the scheduler in a process of their own, service/engine_process.py):
    concurrent requests, attention and n-best included, get what the default server gives each alone; the server
    a reload goes to the engine process."""
    args = ["--bundle", str(real_bundle), "--engine-process", "--scheduler", "continuous", "--provider", "cpu"]
    args += ["--refill-at", "1024"]  # arrivals join running sets at every step
    env = {"MT_ADMIN_TOKEN": TOKEN, "MT_THREADS": "1"}
    with process_server([*args, *NO_CACHE], tmp_path / "engine-process.log", env=env) as remote:
        wait_until(lambda: remote.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        texts = [" ".join([t] * (1 + i % 3)) for i, t in enumerate(TEXTS * 4)]
        for _ in range(5):  # on a busy machine a round may happen to admit nothing mid-run: then another round
            with ThreadPoolExecutor(8) as pool:
                together = list(pool.map(lambda t: translate(remote, t)["translations"][0]["text"], texts))
            try:  # the engine process reports its metrics every 0.2 s
                wait_until(lambda: metric(remote, "mt_admitted_mid_run_sentences_total") > 0, timeout=2, what="")
                break
            except AssertionError:
                continue
        assert metric(remote, "mt_admitted_mid_run_sentences_total") > 0, "no mid-run admission in five rounds"
        detailed = translate(remote, TEXTS[2], return_attention=True, n_best=2, return_scores=True)
        model = remote.client.get("/model").json()
        good = Path(shutil.copytree(real_bundle, tmp_path / "good"))
        manifest = json.loads((good / "manifest.json").read_text(encoding="utf-8"))
        manifest["version"] = "in-the-engine-process"
        (good / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        r = remote.client.post("/admin/reload", json={"bundle": str(good)}, headers=ADMIN)
        after = translate(remote, TEXTS[0])
    assert together == [translate(real, t)["translations"][0]["text"] for t in texts]
    assert detailed == translate(real, TEXTS[2], return_attention=True, n_best=2, return_scores=True) | {
        "model": detailed["model"]
    }
    assert model["provider"] == "CPUExecutionProvider" and model["graphs"] == "main"
    assert r.status_code == 200, r.text
    assert after["model"]["version"] == "in-the-engine-process"
    assert after["translations"] == translate(real, TEXTS[0])["translations"]


def test_graphs_setting_serves_a_bundles_other_set_and_refuses_an_unknown_one(
    real: ProcessServer, tiny_static_bundle: Path, tmp_path: Path
) -> None:
    """MT_GRAPHS: --graphs cuda serves the bundle's GPU set on the CPU (float graphs: what a sentence gets does not
    depend on its batch mates; --graphs float picks such a set by itself, tests/training/export/test_gpu_variant.py);
    an unknown name stops the server with the sets the bundle has."""
    import sys

    args = ["--bundle", str(tiny_static_bundle), "--graphs", "cuda", "--provider", "cpu"]
    with process_server([*args, *NO_CACHE], tmp_path / "cuda.log", env={"MT_THREADS": "1"}) as server:
        wait_until(lambda: server.client.get("/readyz").status_code == 200, timeout=60, what="ready")
        got = [translate(server, t)["translations"][0]["text"] for t in TEXTS]
        info = server.client.get("/model").json()
    assert got == [translate(real, t)["translations"][0]["text"] for t in TEXTS]
    assert "cuda graphs (fp32)" in (tmp_path / "cuda.log").read_text()
    assert (info["graphs"], info["dtype"]) == ("cuda", "fp32")
    default = real.client.get("/model").json()
    assert (default["graphs"], default["dtype"]) == ("main", "fp32")

    wrong = [sys.executable, "-m", "service", "--bundle", str(tiny_static_bundle), "--graphs", "nope", "--port", "0"]
    done = subprocess.run(wrong, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode != 0
    assert "graphs='nope'" in done.stdout + done.stderr and "['cuda']" in done.stdout + done.stderr
