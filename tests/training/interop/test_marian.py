"""Marian / OPUS-MT interop against transformers itself, on small random-weight models built here (offline).

A Marian directory is made the way OPUS-MT's are: separate source/target sentencepiece models, one
vocab.json whose ids differ from either model's own ids, </s>=0, <unk>=1 and <pad> last, the decoder
starting from <pad>. Weights are random (LayerNorms included) so that any misplaced tensor shows.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from core.tokenizer import Tokenizer
from core.translation import DecodeOptions
from inference.engine import Engine
from testkit.synthetic import make_pairs
from training.checkpoint import load, load_model, load_tokenizer, read_vocab_files, save
from training.config import Config, ModelConfig
from training.decode import greedy, source_tensor, strip_eos
from training.interop.marian import MarianError, export_marian, import_marian
from training.model import Transformer
from training.vocab import train_vocab

transformers = pytest.importorskip("transformers", reason="the interop tests need transformers (pip install .[dev])")
pytest.importorskip("safetensors")
# MarianTokenizer asks for sacremoses, which it never uses to tokenize
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

LOGIT_TOLERANCE = 1e-5  # relative to the largest logit; measured 2e-7 .. 1e-6 (docs/interop.md)
MAX_NEW = 12
SENTENCES = ["red blue green", "gold pink gray cyan teal navy", "white", "plum plum black red blue"]
VARIANTS = {
    # name: MarianConfig options; "swish" is an OPUS-MT model in miniature, "relu" the other branches
    "swish": {"activation_function": "swish", "scale_embedding": True, "tie_word_embeddings": True},
    "relu": {"activation_function": "relu", "scale_embedding": False, "tie_word_embeddings": False},
}


def _randomize(module: torch.nn.Module, seed: int, pad_row: int | None = None) -> None:
    """Noise on every weight (LayerNorms too); Marian's padding embedding stays zero."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.3)
        for name, b in module.named_buffers():
            if name.endswith("final_logits_bias"):
                b.copy_(torch.randn(b.shape, generator=gen))
        if pad_row is not None:
            module.get_input_embeddings().weight[pad_row].zero_()  # type: ignore[operator]


def _train_spm(lines: list[str], prefix: Path, size: int) -> Path:
    text = prefix.with_suffix(".txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(prefix),
        vocab_size=size,
        model_type="unigram",
        eos_id=0,
        unk_id=1,
        bos_id=-1,
        pad_id=-1,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    return prefix.with_suffix(".model")


@pytest.fixture(scope="module")
def marian_tokenizer_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """source.spm, target.spm, vocab.json and tokenizer_config.json, as in an OPUS-MT directory."""
    work = tmp_path_factory.mktemp("marian-spm")
    pairs = make_pairs(400, seed=3)
    source = _train_spm([s for s, _ in pairs], work / "source", 40)
    target = _train_spm([t for _, t in pairs], work / "target", 40)
    pieces: set[str] = set()
    for path in (source, target):
        proc = spm.SentencePieceProcessor(model_file=str(path))
        pieces.update(proc.id_to_piece(i) for i in range(proc.get_piece_size()))
    ordinary = sorted(pieces - {"</s>", "<unk>"})
    random.Random(0).shuffle(ordinary)  # vocab.json ids are not the spm models' ids
    vocab = {p: i for i, p in enumerate(["</s>", "<unk>", *ordinary, "<pad>"])}
    out = tmp_path_factory.mktemp("marian-tok")
    shutil.copyfile(source, out / "source.spm")
    shutil.copyfile(target, out / "target.spm")
    (out / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tok = {"source_lang": "en", "target_lang": "xx", "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>"}
    (out / "tokenizer_config.json").write_text(json.dumps(tok), encoding="utf-8")
    return out


def _marian_dir(files: Path, out: Path, variant: str) -> Path:
    vocab = json.loads((files / "vocab.json").read_text(encoding="utf-8"))
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
        **VARIANTS[variant],
    )
    torch.manual_seed(1)
    model = transformers.MarianMTModel(config).eval()
    _randomize(model, seed=2, pad_row=pad)
    with torch.no_grad():  # untied, transformers 5 gives each side its own; OPUS-MT's share one
        for side in (model.model.encoder, model.model.decoder):
            side.embed_tokens.weight.copy_(model.model.shared.weight)
    model.save_pretrained(out)
    for name in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        shutil.copyfile(files / name, out / name)
    return out


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def marian(request: pytest.FixtureRequest, marian_tokenizer_files: Path, tmp_path_factory: pytest.TempPathFactory):
    """(variant, Marian directory, our imported checkpoint)."""
    directory = _marian_dir(marian_tokenizer_files, tmp_path_factory.mktemp(f"marian-{request.param}"), request.param)
    checkpoint = tmp_path_factory.mktemp("imported") / "model.pt"
    import_marian(directory, checkpoint)
    return request.param, directory, checkpoint


def _hf(directory: Path):  # type: ignore[no-untyped-def]
    model = transformers.MarianMTModel.from_pretrained(directory).eval()
    return model, transformers.MarianTokenizer.from_pretrained(directory)


def _batch(tokenizer, texts: list[str]) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    return tokenizer(texts, return_tensors="pt", padding=True)


# -------------------------------------------------------------------------- (1) import: logits equal


def test_import_maps_config_and_vocabulary(marian: tuple[str, Path, Path], tmp_path: Path) -> None:
    variant, directory, checkpoint = marian
    cfg = Config.from_dict(load(checkpoint)["config"]).model
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    assert cfg.positional_layout == "concat" and not cfg.pre_norm
    assert cfg.activation == variant and cfg.scale_embeddings == (variant == "swish")
    assert cfg.tie_embeddings == (variant == "swish") and cfg.final_logits_bias
    assert (cfg.pad_id, cfg.bos_id, cfg.eos_id, cfg.unk_id) == (vocab["<pad>"], vocab["<pad>"], 0, 1)
    assert cfg.max_positions == 64 and cfg.vocab_size == len(vocab)
    ours = Tokenizer(_vocab_dir(checkpoint, tmp_path / "our-vocab"))
    _, hf_tokenizer = _hf(directory)
    for text in SENTENCES + ["unseen ß characters 7"]:
        assert ours.encode_source(text) + [cfg.eos_id] == hf_tokenizer(text)["input_ids"]
        assert ours.encode_target(text) + [cfg.eos_id] == hf_tokenizer(text_target=text)["input_ids"]


def _vocab_dir(checkpoint: Path, where: Path) -> Path:
    load_tokenizer(load(checkpoint)["vocab_files"], where)
    return where


def test_imported_logits_equal_transformers(marian: tuple[str, Path, Path]) -> None:
    _, directory, checkpoint = marian
    hf_model, hf_tokenizer = _hf(directory)
    model, config, _ = load_model(checkpoint)
    batch = _batch(hf_tokenizer, SENTENCES)
    targets = _batch(hf_tokenizer, [s.upper() for s in reversed(SENTENCES)])["input_ids"]
    start = torch.full((len(SENTENCES), 1), config.model.bos_id)
    decoder_in = torch.cat([start, targets[:, :-1]], dim=1)
    with torch.no_grad():
        expected = hf_model(**batch, decoder_input_ids=decoder_in).logits
        got = model(batch["input_ids"], decoder_in)
    keep = decoder_in != config.model.pad_id  # rows past a target's end are padding on the decoder side
    keep[:, 0] = True
    _assert_close(got[keep], expected[keep])


def _assert_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    diff, scale = (got - expected).abs().max().item(), expected.abs().max().item()
    assert diff <= LOGIT_TOLERANCE * max(1.0, scale), (
        f"max |ours - transformers| = {diff:.3g} (largest logit {scale:.3g})"
    )


def test_legacy_opus_mt_layout_imports_the_same(marian_tokenizer_files: Path, tmp_path: Path) -> None:
    """Older OPUS-MT directories: pytorch_model.bin with every alias and the position tables, BART-era keys."""
    directory = _marian_dir(marian_tokenizer_files, tmp_path / "new", "swish")
    import_marian(directory, tmp_path / "new.pt")
    model = transformers.MarianMTModel.from_pretrained(directory)
    legacy = tmp_path / "legacy"
    shutil.copytree(directory, legacy)
    (legacy / "model.safetensors").unlink()
    torch.save(model.state_dict(), legacy / "pytorch_model.bin")
    assert "model.encoder.embed_positions.weight" in model.state_dict()
    config = json.loads((legacy / "config.json").read_text())
    config.update(normalize_before=False, normalize_embedding=False, static_position_embeddings=True)
    config.update(add_bias_logits=False, bad_words_ids=[[config["pad_token_id"]]], num_beams=4)
    (legacy / "config.json").write_text(json.dumps(config))
    import_marian(legacy, tmp_path / "legacy.pt")
    new, old = load(tmp_path / "new.pt"), load(tmp_path / "legacy.pt")
    assert new["config"] == old["config"]
    assert all(torch.equal(t, old["model"][k]) for k, t in new["model"].items())


# --------------------------------------------------------------------------- (2) round trips: identity


def test_marian_import_export_import_is_identity(marian: tuple[str, Path, Path], tmp_path: Path) -> None:
    _, directory, checkpoint = marian
    exported = tmp_path / "exported"
    export_marian(checkpoint, exported, source_language="en", target_language="xx")
    again = tmp_path / "again.pt"
    import_marian(exported, again)
    first, second = load(checkpoint), load(again)
    assert first["config"] == second["config"]
    assert first["model"].keys() == second["model"].keys()
    for name, tensor in first["model"].items():
        assert torch.equal(tensor, second["model"][name]), name
    assert first["vocab_files"] == second["vocab_files"]
    # ... and the exported directory is the original one, tensor for tensor and id for id
    for name in ("source.spm", "target.spm"):
        assert (exported / name).read_bytes() == (directory / name).read_bytes()
    assert json.loads((exported / "vocab.json").read_text()) == json.loads((directory / "vocab.json").read_text())
    original, written = (json.loads((d / "config.json").read_text()) for d in (directory, exported))
    for key in ("d_model", "vocab_size", "activation_function", "scale_embedding", "tie_word_embeddings"):
        assert written[key] == original[key], key
    for key in ("pad_token_id", "eos_token_id", "decoder_start_token_id", "max_position_embeddings"):
        assert written[key] == original[key], key
    from safetensors.torch import load_file

    theirs, ours = load_file(directory / "model.safetensors"), load_file(exported / "model.safetensors")
    assert theirs.keys() == ours.keys()
    assert all(torch.equal(theirs[k], ours[k]) for k in theirs)


@pytest.fixture(scope="module")
def our_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One of our models in our conventions: interleaved sinusoids, pad 0 / bos 2, untied, biased logits."""
    work = tmp_path_factory.mktemp("ours")
    corpus = work / "train.tsv"
    corpus.write_text("".join(f"{s}\t{t}\n" for s, t in make_pairs(400, seed=4)), encoding="utf-8")
    tokenizer = train_vocab(corpus, work / "vocab", vocab_size=48)
    cfg = ModelConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        n_heads=4,
        d_ff=64,
        encoder_layers=2,
        decoder_layers=2,
        activation="relu",
        max_positions=64,
        tie_embeddings=False,
        final_logits_bias=True,
    )
    torch.manual_seed(5)
    model = Transformer(cfg).eval()
    _randomize(model, seed=6)
    files = read_vocab_files(work / "vocab")
    path = work / "ours.pt"
    save(path, {"config": Config(model=cfg).to_dict(), "model": model.state_dict(), "vocab_files": files})
    return path


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_our_export_import_is_identity(our_checkpoint: Path, tmp_path: Path, weights: str) -> None:
    export_marian(our_checkpoint, tmp_path / "marian", weights_format=weights)
    assert (tmp_path / "marian" / ("model.safetensors" if weights == "safetensors" else "pytorch_model.bin")).is_file()
    written = json.loads((tmp_path / "marian" / "config.json").read_text())
    last = load(our_checkpoint)["config"]["model"]["vocab_size"] - 1
    assert written["transformer_mt"] == {
        "positional_layout": "interleaved",
        "swapped_ids": [0, last],
        "final_logits_bias": True,
    }
    import_marian(tmp_path / "marian", tmp_path / "back.pt")
    first, second = load(our_checkpoint), load(tmp_path / "back.pt")
    assert first["config"]["model"] == second["config"]["model"]
    for name, tensor in first["model"].items():
        assert torch.equal(tensor, second["model"][name]), name
    assert (
        json.loads(first["vocab_files"]["vocab.json"])["pieces"]
        == json.loads(second["vocab_files"]["vocab.json"])["pieces"]
    )


# ---------------------------------------------------------------- (3) our ONNX engine vs generate()


def test_engine_greedy_equals_transformers_generate(marian: tuple[str, Path, Path], tmp_path: Path) -> None:
    from training.export import export_bundle

    _, directory, checkpoint = marian
    export_bundle(checkpoint, tmp_path / "bundle", name="marian-test")
    engine = Engine.load(tmp_path / "bundle", provider="cpu", threads=1)
    options = DecodeOptions(beam_size=1, max_length=MAX_NEW, max_length_ratio=100.0)
    ours = [t.best.token_ids for t in engine.translate(SENTENCES, options)]

    hf_model, hf_tokenizer = _hf(directory)
    pad = hf_model.config.pad_token_id
    with torch.no_grad():
        out = hf_model.generate(
            **_batch(hf_tokenizer, SENTENCES),
            num_beams=1,
            do_sample=False,
            max_new_tokens=MAX_NEW,
            bad_words_ids=[[pad]],  # our search never generates padding (= Marian's start token)
        )
    eos = hf_model.config.eos_token_id
    theirs = [strip_eos(_until_eos(row[1:].tolist(), eos), eos) for row in out]
    assert ours == theirs
    assert any(len(t) > 2 for t in ours), "degenerate test: every output is (nearly) empty"


def _until_eos(tokens: list[int], eos: int) -> list[int]:
    return tokens[: tokens.index(eos) + 1] if eos in tokens else tokens


# ----------------------------------------------------- (4) our exported directory in transformers


def test_exported_directory_loads_in_transformers_with_equal_logits(our_checkpoint: Path, tmp_path: Path) -> None:
    export_marian(our_checkpoint, tmp_path / "marian", source_language="en", target_language="xx")
    hf_model, hf_tokenizer = _hf(tmp_path / "marian")
    model, config, vocab_files = load_model(our_checkpoint)
    cfg = config.model
    tokenizer = load_tokenizer(vocab_files, tmp_path / "vocab")
    swap = {0: cfg.vocab_size - 1, cfg.vocab_size - 1: 0}  # export puts our pad last

    def theirs(ids: list[int]) -> list[int]:
        return [swap.get(i, i) for i in ids]

    sources = [tokenizer.encode_source(s) for s in SENTENCES]
    for text, ids in zip(SENTENCES, sources, strict=True):
        assert hf_tokenizer(text)["input_ids"] == theirs(ids + [cfg.eos_id])
    src = source_tensor(model, sources)
    tgt = source_tensor(model, [tokenizer.encode_target(s.upper()) for s in SENTENCES])
    tgt_in = torch.cat([torch.full((len(SENTENCES), 1), cfg.bos_id), tgt[:, :-1]], dim=1)
    order = torch.tensor(theirs(list(range(cfg.vocab_size))))
    with torch.no_grad():
        got = model(src, tgt_in)
        expected = hf_model(
            input_ids=order[src], attention_mask=src != cfg.pad_id, decoder_input_ids=order[tgt_in]
        ).logits[..., order]
    keep = tgt_in != cfg.pad_id
    _assert_close(got[keep], expected[keep])

    # generate() with the exported generation_config.json (start = our BOS, pad and BOS banned) = our greedy
    hf_model.generation_config.num_beams = 1
    with torch.no_grad():
        out = hf_model.generate(input_ids=order[src], attention_mask=src != cfg.pad_id, max_new_tokens=MAX_NEW)
    reference = [o.tokens for o in greedy(model, sources, [MAX_NEW] * len(sources))]
    hf_eos = swap.get(cfg.eos_id, cfg.eos_id)
    assert [theirs(r) for r in reference] == [_until_eos(row[1:].tolist(), hf_eos) for row in out]
    assert hf_tokenizer.decode(out[0], skip_special_tokens=True) == tokenizer.decode(reference[0])


# ------------------------------------------------------------------------------------- refusals


def test_refusals_name_the_file_or_option(marian: tuple[str, Path, Path], tmp_path: Path) -> None:
    _, directory, checkpoint = marian
    broken = tmp_path / "broken"
    shutil.copytree(directory, broken)
    (broken / "target.spm").unlink()
    with pytest.raises(MarianError, match="target.spm is missing"):
        import_marian(broken, tmp_path / "x.pt")
    shutil.copyfile(directory / "target.spm", broken / "target.spm")
    config = json.loads((broken / "config.json").read_text())
    changes: list[tuple[str, object, str]] = [
        ("activation_function", "gelu_new", "activation_function='gelu_new'"),
        ("normalize_before", True, "normalize_before=True"),
        ("decoder_ffn_dim", 128, "encoder_ffn_dim=64 != decoder_ffn_dim=128"),
    ]
    for key, value, message in changes:
        (broken / "config.json").write_text(json.dumps({**config, key: value}))
        with pytest.raises(MarianError, match=message):
            import_marian(broken, tmp_path / "x.pt")
    (broken / "config.json").write_text(json.dumps(config))
    from safetensors.torch import load_file, save_file

    weights = load_file(broken / "model.safetensors")
    extra = [
        ("model.encoder.embed_tokens.weight", weights["model.shared.weight"] + 1, "embeddings differ"),
        ("model.encoder.layernorm_embedding.weight", torch.ones(32), "does not map"),
    ]
    for name, tensor, message in extra:
        save_file({**weights, name: tensor}, broken / "model.safetensors", metadata={"format": "pt"})
        with pytest.raises(MarianError, match=message):
            import_marian(broken, tmp_path / "x.pt")
    payload = load(checkpoint)
    payload["config"]["model"]["pre_norm"] = True
    model_cfg = ModelConfig(**payload["config"]["model"])
    payload["model"] = Transformer(model_cfg).state_dict()
    save(tmp_path / "pre.pt", payload)
    with pytest.raises(MarianError, match="pre_norm"):
        export_marian(tmp_path / "pre.pt", tmp_path / "out")


def test_command_line(marian: tuple[str, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from training.cli import main

    _, directory, _ = marian
    assert main(["import-marian", str(directory), str(tmp_path / "cli.pt")]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["positional_layout"] == "concat"
    assert main(["export-marian", str(tmp_path / "cli.pt"), str(tmp_path / "out"), "--weights", "bin"]) == 0
    assert (tmp_path / "out" / "pytorch_model.bin").is_file()
    assert main(["export-marian", str(tmp_path / "cli.pt"), str(tmp_path / "out")]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["import-marian", str(tmp_path), str(tmp_path / "x.pt")]) == 2
    assert "config.json is missing" in capsys.readouterr().err


# ------------------------------------------------------------------------- (5) CTranslate2 (optional)


def test_ctranslate2_converts_the_exported_directory(marian: tuple[str, Path, Path], tmp_path: Path) -> None:
    ctranslate2 = pytest.importorskip("ctranslate2", reason="optional: pip install .[interop]")
    _, _, checkpoint = marian
    export_marian(checkpoint, tmp_path / "marian")
    # What ct2-transformers-converter --model DIR --output_dir OUT runs, without a second interpreter start
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(tmp_path / "marian")).convert(str(tmp_path / "ct2"))
    _, hf_tokenizer = _hf(tmp_path / "marian")
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", inter_threads=1, intra_threads=1)
    sources = [hf_tokenizer.convert_ids_to_tokens(hf_tokenizer(s)["input_ids"]) for s in SENTENCES]
    results = translator.translate_batch(sources, beam_size=1, max_decoding_length=MAX_NEW)
    model, config, _ = load_model(checkpoint)
    tokenizer = Tokenizer(_vocab_dir(checkpoint, tmp_path / "vocab"))
    reference = [o.tokens for o in greedy(model, [tokenizer.encode_source(s) for s in SENTENCES], [MAX_NEW] * 4)]
    expected = [[tokenizer.id_to_piece(t) for t in strip_eos(r, config.model.eos_id)] for r in reference]
    assert [r.hypotheses[0] for r in results] == expected
