"""The vocabulary shortlist: its table, its decoder step against the whole-vocabulary one, and the engine with it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from core.bundle import read_manifest, write_manifest
from core.tokenizer import Tokenizer
from core.translation import DecodeOptions
from inference.engine import BundleError, Engine, EngineError
from inference.shortlist import Shortlist
from testkit.running import drive, graph_runs
from testkit.synthetic import WORDS, make_pairs
from training.export.shortlist import FLOOR, translation_table

TEXTS = [s for s, _ in make_pairs(8, seed=21, min_len=1, max_len=7)] + ["hello world", "gold gold gold gold"]
OPTIONS = DecodeOptions(beam_size=4, n_best=2, length_penalty=0.6)


def test_ibm1_finds_each_word_s_translation(tiny_bundle: Path, synthetic_corpus: tuple[Path, Path]) -> None:
    """The synthetic task's target spells each source word in capitals: for every word, the likeliest translation
    of its first source piece is a piece of its capitalised form (a broken E or M step scatters them)."""
    tokenizer = Tokenizer(tiny_bundle)
    pairs = [line.split("\t") for line in synthetic_corpus[0].read_text(encoding="utf-8").splitlines()][:1500]
    sources = [np.array(tokenizer.encode_source(s), np.int64) for s, _ in pairs]
    targets = [np.array(tokenizer.encode_target(t), np.int64) for _, t in pairs]
    table = translation_table(sources, targets, len(tokenizer), iterations=5)
    assert np.allclose(table.sum(axis=1)[np.unique(np.concatenate(sources))], 1.0, atol=1e-4)
    for word in WORDS:
        first = tokenizer.encode_source(word)[0]
        assert int(table[first].argmax()) in tokenizer.encode_target(word.upper()), word


def test_the_bundle_records_and_verifies_its_shortlist(listed_bundle: Path) -> None:
    manifest = read_manifest(listed_bundle)  # every file's checksum, the new ones included
    entry = manifest["shortlist"]
    assert {entry["table"], entry["graph"]} <= set(manifest["files"])
    assert entry["frequent"] <= 16 and entry["per_piece"] == 3 and entry["copy_source"] is True


def mask_of(allowed: np.ndarray) -> np.ndarray:
    return np.where(allowed, np.float32(0), np.float32(-np.inf))


def _decoder_feeds(engine: Engine) -> list[dict[str, np.ndarray]]:
    """Real inputs of the decoder step, captured while the engine translates TEXTS in one batch."""
    feeds: list[dict[str, np.ndarray]] = []
    run_graph = engine.run_graph

    def capture(role: str, inputs: dict[str, Any], outputs: list[str], *args: Any, **kwargs: Any) -> list[Any]:
        if role == "decoder":
            feeds.append({k: np.array(v if isinstance(v, np.ndarray) else v.numpy()) for k, v in inputs.items()})
        return run_graph(role, inputs, outputs, *args, **kwargs)

    engine.run_graph = capture  # type: ignore[method-assign]
    try:
        engine.translate(TEXTS, OPTIONS)
    finally:
        del engine.run_graph
    return feeds


def test_the_step_scores_each_row_over_its_own_list(listed_bundle: Path) -> None:
    """The shortlisted step's top-k equals a log-softmax over each row's allowed pieces of the whole-vocabulary
    step's distribution, and with every piece listed and allowed, the whole-vocabulary step's top-k."""
    manifest = read_manifest(listed_bundle)
    engine = Engine.load(listed_bundle, provider="cpu", threads=1)
    table = Shortlist.load(listed_bundle, manifest)
    full = ort.InferenceSession(str(listed_bundle / "decoder.onnx"), providers=["CPUExecutionProvider"])
    short = ort.InferenceSession(
        str(listed_bundle / manifest["shortlist"]["graph"]), providers=["CPUExecutionProvider"]
    )
    vocab_size = engine.vocab_size
    rng = np.random.default_rng(3)
    feeds = _decoder_feeds(engine)
    assert len(feeds) > 3
    for feed in feeds[1:4]:
        rows = feed["tokens"].size
        k = int(feed["k"].reshape(-1)[0])
        whole_lp, whole_ids = full.run(
            ["topk_logprobs", "topk_ids"], {**feed, "k": np.full_like(feed["k"], vocab_size)}
        )
        logprobs = np.full((rows, vocab_size), -np.inf)
        np.put_along_axis(logprobs, whole_ids.reshape(rows, -1), whole_lp.reshape(rows, -1).astype(np.float64), axis=1)

        everything = table.union([np.arange(vocab_size)])
        assert everything is not None
        every_row = np.ones((rows, vocab_size), bool)
        lp, ids = short.run(["topk_logprobs", "topk_ids"], {**feed, **everything[0], "mask": mask_of(every_row)})
        full_lp, full_ids = full.run(["topk_logprobs", "topk_ids"], feed)
        assert np.array_equal(ids, full_ids)
        assert np.allclose(lp, full_lp, atol=1e-5)

        listed = np.sort(rng.choice(vocab_size, size=40, replace=False))
        allowed = rng.random((rows, len(listed))) < 0.6
        allowed[:, :k] = True  # at least k pieces a row
        one = table.union([listed])
        assert one is not None and one[1].all()
        lp, ids = short.run(["topk_logprobs", "topk_ids"], {**feed, **one[0], "mask": mask_of(allowed)})
        lp, ids = lp.reshape(rows, -1), ids.reshape(rows, -1)
        for r in range(rows):
            own = listed[allowed[r]]
            restricted = logprobs[r, own] - np.logaddexp.reduce(logprobs[r, own])
            best = np.argsort(-restricted, kind="stable")[:k]
            assert np.array_equal(ids[r], own[best])
            assert np.allclose(lp[r], restricted[best], atol=1e-5)


def test_pieces_past_the_floor_and_outside_the_list(listed_bundle: Path) -> None:
    """A row with fewer listed pieces than k: its proposals past them are -inf, never an unlisted piece's score; a
    listed piece more than FLOOR below the row's best scores as if it were at the floor (the bias lifts one piece
    far above the rest to make one)."""
    manifest = read_manifest(listed_bundle)
    engine = Engine.load(listed_bundle, provider="cpu", threads=1)
    table = Shortlist.load(listed_bundle, manifest)
    short = ort.InferenceSession(
        str(listed_bundle / manifest["shortlist"]["graph"]), providers=["CPUExecutionProvider"]
    )
    feed = _decoder_feeds(engine)[2]
    rows = feed["tokens"].size
    k = int(feed["k"].reshape(-1)[0])
    listed = np.arange(8, 8 + 4 * k)  # past the special pieces, which the model bars with -inf
    inputs = table.union([listed])
    assert inputs is not None
    allowed = np.ones((rows, len(listed)), bool)
    allowed[0, 2:] = False  # two pieces only in the first row
    lifted = dict(inputs[0])
    lifted["bias"] = lifted["bias"].copy()
    lifted["bias"][1] += 10 * FLOOR  # the second listed piece dwarfs the others in every row
    lp, ids = short.run(["topk_logprobs", "topk_ids"], {**feed, **lifted, "mask": mask_of(allowed)})
    lp, ids = lp.reshape(rows, -1), ids.reshape(rows, -1)
    assert ids[0, 0] == listed[1] and ids[0, 1] == listed[0]
    assert np.all(np.isneginf(lp[0, 2:])) and np.isfinite(lp[0, :2]).all()
    for r in range(rows):
        assert ids[r, 0] == listed[1] and abs(lp[r, 0]) < 1e-4
        assert np.allclose(lp[r, 1 if r else 2 :][: (k - 1 if r else 0)], -FLOOR, atol=1e-3)
        assert set(ids[r, : (k if r else 2)].tolist()) <= set(listed.tolist())


def test_a_list_of_every_piece_translates_as_the_whole_vocabulary(listed_bundle: Path) -> None:
    """The engine's shortlisted path (inputs gathered once per set, k within the list, hypotheses reordered) with a
    list that holds every piece: the same translations as without a shortlist."""
    plain = Engine.load(listed_bundle, provider="cpu", threads=1)
    listed = Engine.load(listed_bundle, provider="cpu", threads=1, shortlist=True)
    assert listed.shortlist is not None
    table = listed.shortlist
    listed.shortlist = Shortlist(
        np.arange(listed.vocab_size), np.full((listed.vocab_size, 1), -1), [], (table.weight, table.bias)
    )
    listed.shortlist_most = 1.0
    for texts in (TEXTS, TEXTS[:1], TEXTS[3:4]):
        want, got = plain.translate(texts, OPTIONS), listed.translate(texts, OPTIONS)
        assert [[h.token_ids for h in t.hypotheses] for t in got] == [[h.token_ids for h in t.hypotheses] for t in want]
        for t, u in zip(got, want, strict=True):
            assert np.allclose([h.score for h in t.hypotheses], [h.score for h in u.hypotheses], atol=1e-4)


def test_translations_keep_to_their_lists_whatever_their_batch_mates(listed_bundle: Path) -> None:
    """With the bundle's table, each translation uses only its sentence's pieces, and a sentence translates the
    same alone and beside others (each hypothesis is masked to its own sentence's list)."""
    engine = Engine.load(listed_bundle, provider="cpu", threads=1, shortlist=True)
    assert engine.shortlist is not None
    engine.shortlist_most = 1.0  # the tiny vocabulary: every set within the shortlist
    together = engine.translate(TEXTS, OPTIONS)
    smaller = 0
    for text, translation in zip(TEXTS, together, strict=True):
        own = engine.shortlist.sentence(engine.tokenize(text))
        smaller += len(own) < engine.vocab_size
        for hyp in translation.hypotheses:
            assert np.isin(hyp.token_ids, own).all(), text
        alone = engine.translate([text], OPTIONS)[0]
        assert [h.token_ids for h in alone.hypotheses] == [h.token_ids for h in translation.hypotheses], text
    assert smaller == len(TEXTS)  # the lists are real restrictions


def tight(engine: Engine) -> Shortlist:
    """A table whose lists hold only the pieces of the sentence's own words' translations (and EOS, UNK): sentences
    with different words have lists that cannot produce each other's translations."""
    assert engine.shortlist is not None
    tokenizer = engine.tokenizer
    found: dict[int, set[int]] = {}
    for word in WORDS:
        for piece in tokenizer.encode_source(word):
            found.setdefault(piece, set()).update(tokenizer.encode_target(word.upper()))
    candidates = np.full((engine.vocab_size, max(map(len, found.values()))), -1)
    for piece, targets in found.items():
        candidates[piece, : len(targets)] = sorted(targets)
    specials = engine.manifest["special_ids"]
    projection = (engine.shortlist.weight, engine.shortlist.bias)
    return Shortlist(np.zeros(0, np.int64), candidates, [specials["eos"], specials["unk"]], projection, False)


def test_sentences_admitted_and_leaving_mid_run_keep_their_own_lists(listed_bundle: Path) -> None:
    """A running set that sentences join between steps and leave (done or dropped): leaving keeps the set's listed
    pieces and drops only the leavers' mask rows, joining lists the set again; every answered sentence translates as
    it does alone, with lists that would change its translation were it given another sentence's."""
    engine = Engine.load(listed_bundle, provider="cpu", threads=1, shortlist=True)
    engine.shortlist = tight(engine)
    engine.shortlist_most = 1.0
    first, other = engine.translate(TEXTS[:2], OPTIONS)
    assert not np.isin(first.best.token_ids, engine.shortlist.sentence(engine.tokenize(TEXTS[1]))).all()
    rng = np.random.default_rng(7)
    jobs = [(i, TEXTS[i % len(TEXTS)], OPTIONS) for i in range(2 * len(TEXTS))]
    results, dropped, widest = drive(engine.running_set(), jobs, rng)
    assert widest > 2 and len(results) + len(dropped) == 2 * len(TEXTS)
    for key, translation in results.items():
        alone = engine.translate([TEXTS[key % len(TEXTS)]], OPTIONS)[0]
        assert [h.token_ids for h in translation.hypotheses] == [h.token_ids for h in alone.hypotheses], key


def test_a_set_whose_lists_cover_most_of_the_vocabulary_decodes_with_all_of_it(listed_bundle: Path) -> None:
    """Past ``shortlist_most`` of the vocabulary the set takes the whole-vocabulary step: the plain translations."""
    plain = Engine.load(listed_bundle, provider="cpu", threads=1)
    engine = Engine.load(listed_bundle, provider="cpu", threads=1, shortlist=True)
    assert engine.shortlist is not None
    union = np.unique(np.concatenate([engine.shortlist.sentence(engine.tokenize(t)) for t in TEXTS]))
    engine.shortlist_most = (len(union) - 1) / engine.vocab_size
    want, got = plain.translate(TEXTS, OPTIONS), engine.translate(TEXTS, OPTIONS)
    assert [[h.token_ids for h in t.hypotheses] for t in got] == [[h.token_ids for h in t.hypotheses] for t in want]
    alone = engine.shortlist.sentence(engine.tokenize(TEXTS[0]))
    assert len(alone) <= engine.shortlist_most * engine.vocab_size  # alone, the same sentence keeps to its list
    assert np.isin(engine.translate(TEXTS[:1], OPTIONS)[0].best.token_ids, alone).all()


def test_loading_a_shortlist_the_bundle_lacks_says_how_to_add_one(tiny_bundle: Path) -> None:
    with pytest.raises(EngineError, match="python -m training shortlist"):
        Engine.load(tiny_bundle, provider="cpu", threads=1, shortlist=True)


def test_a_shortlisted_step_of_an_older_export_says_how_to_rebuild_it(listed_bundle: Path, tmp_path: Path) -> None:
    """A step whose inputs are not today's (session 39's took a bool ``allowed`` instead of ``mask``) is refused with
    the command that writes it again, not run with inputs it does not take."""
    import onnx

    bundle = tmp_path / "old"
    shutil.copytree(listed_bundle, bundle)
    manifest = read_manifest(bundle)
    graph = bundle / manifest["shortlist"]["graph"]
    model = onnx.load(str(graph), load_external_data=False)
    for tensor in (*model.graph.input, *(n for n in model.graph.node)):
        if isinstance(tensor, onnx.ValueInfoProto) and tensor.name == "mask":
            tensor.name = "allowed"
        elif isinstance(tensor, onnx.NodeProto):
            tensor.input[:] = ["allowed" if i == "mask" else i for i in tensor.input]
    onnx.save(model, str(graph))
    write_manifest(bundle, manifest)  # the file's new checksum
    with pytest.raises(BundleError, match="python -m training shortlist"):
        Engine.load(bundle, provider="cpu", threads=1, shortlist=True)


def test_an_inline_projection_is_returned_as_the_one_in_the_weights_file(listed_bundle: Path, tmp_path: Path) -> None:
    """A decoder that holds its weights inline (no weights file) gives its projection to the table itself: the same
    rows the engine reads from the weights file at the manifest's offset, and the same bias."""
    import onnx

    from training.export.shortlist import shortlist_graph

    inline = tmp_path / "decoder.onnx"
    onnx.save(onnx.load(str(listed_bundle / "decoder.onnx")), str(inline))  # external data read, written inline
    weight, bias = shortlist_graph(inline, tmp_path / "decoder_shortlist.onnx")
    table = Shortlist.load(listed_bundle, read_manifest(listed_bundle))
    assert isinstance(weight, np.ndarray)
    assert np.array_equal(weight, table.weight) and np.array_equal(bias, table.bias)
    session = ort.InferenceSession(str(tmp_path / "decoder_shortlist.onnx"), providers=["CPUExecutionProvider"])
    assert {"vocab", "weight", "bias", "mask"} <= {i.name for i in session.get_inputs()}


def test_a_shortlisted_step_is_not_swapped_for_the_lean_one(listed_bundle: Path, tmp_path: Path) -> None:
    """An engine with both a shortlist and a lean step (``training lean-step --set main``, ``lean_step=True``) runs
    the shortlisted step where its lists apply, whoever asked for rows, and translates as with the shortlist alone."""
    from training.export.lean import add_lean_step

    bundle = tmp_path / "both"
    shutil.copytree(listed_bundle, bundle)
    add_lean_step(bundle, "main")
    alone = Engine.load(listed_bundle, provider="cpu", threads=1, shortlist=True)
    both = Engine.load(bundle, provider="cpu", threads=1, shortlist=True, lean_step=True)
    assert "decoder_lean" in both.sessions
    alone.shortlist_most = both.shortlist_most = 1.0  # the tiny model's lists cover most of its vocabulary
    roles = graph_runs(both)
    want, got = alone.translate(TEXTS, OPTIONS), both.translate(TEXTS, OPTIONS)
    assert "decoder_shortlist" in roles and "decoder_lean" not in roles
    assert [[h.token_ids for h in t.hypotheses] for t in got] == [[h.token_ids for h in t.hypotheses] for t in want]
