import math

import pytest
import torch

from training.config import ConfigError, load_config, parse_override
from training.model import Transformer, causal_mask, label_smoothed_nll, sinusoidal_table


def test_positional_encoding_matches_the_paper_formula() -> None:
    d = 16
    table = sinusoidal_table(50, d)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_marian_layout_puts_sines_first() -> None:
    d = 8
    inter, concat = sinusoidal_table(10, d), sinusoidal_table(10, d, "concat")
    assert torch.allclose(concat[:, : d // 2], inter[:, 0::2])
    assert torch.allclose(concat[:, d // 2 :], inter[:, 1::2])


def test_causal_mask_forbids_only_the_future() -> None:
    mask = causal_mask(5)
    for i in range(5):
        for j in range(5):
            assert bool(mask[i, j]) == (j > i)


def _model(**overrides: object) -> Transformer:
    cfg = load_config("tiny", overrides=[f"model.{k}={v!r}" for k, v in overrides.items()])
    torch.manual_seed(0)
    return Transformer(cfg.model).eval()


def test_decoder_cannot_see_future_tokens() -> None:
    model = _model()
    src = torch.tensor([[5, 6, 7, 3]])
    a = torch.tensor([[2, 8, 9, 10, 11]])
    b = a.clone()
    b[0, 3:] = torch.tensor([20, 21])
    la, lb = model(src, a), model(src, b)
    assert torch.allclose(la[0, :3], lb[0, :3], atol=1e-6)
    assert not torch.allclose(la[0, 3:], lb[0, 3:], atol=1e-3)


def test_source_padding_changes_nothing() -> None:
    model = _model()
    tgt = torch.tensor([[2, 8, 9]])
    plain = model(torch.tensor([[5, 6, 7, 3]]), tgt)
    padded = model(torch.tensor([[5, 6, 7, 3, 0, 0, 0]]), tgt)
    assert torch.allclose(plain, padded, atol=1e-5)


@pytest.mark.parametrize("pre_norm,activation", [(True, "gelu"), (False, "swish")])
def test_options_build_and_run(pre_norm: bool, activation: str) -> None:
    model = _model(pre_norm=pre_norm, activation=activation)
    logits = model(torch.tensor([[5, 6, 3]]), torch.tensor([[2, 7]]))
    assert logits.shape == (1, 2, model.config.vocab_size)
    assert torch.isfinite(logits).all()


def test_embeddings_are_tied_and_scaled() -> None:
    model = _model()
    assert model.encoder_embed.token is model.embed_tokens is model.decoder_embed.token
    assert model.encoder_embed.scale == pytest.approx(math.sqrt(model.config.d_model))


def test_label_smoothing_formula() -> None:
    logits = torch.randn(1, 3, 10)
    target = torch.tensor([[4, 2, 0]])
    loss, nll = label_smoothed_nll(logits, target, 0.1, pad_id=0)
    logp = logits.log_softmax(-1)[0, :2]
    want_nll = -(logp[0, 4] + logp[1, 2])
    want = 0.9 * want_nll - 0.1 * logp.mean(-1).sum()
    assert nll.item() == pytest.approx(want_nll.item(), rel=1e-5)
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)


def test_bad_config_is_refused_with_the_offending_value() -> None:
    with pytest.raises(ConfigError, match="n_heads=5"):
        load_config("tiny", overrides=["model.n_heads=5"])
    with pytest.raises(ConfigError, match="unknown setting train.lrr"):
        load_config("tiny", overrides=["train.lrr=1"])
    with pytest.raises(ConfigError, match="data.pad_multiple must be at least 1, got 0"):
        load_config("tiny", overrides=["data.pad_multiple=0"])
    with pytest.raises(ConfigError, match="name that file too"):
        load_config("tiny", overrides=["data.tag_synthetic=true"])
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("lr=1")


def test_extra_padding_from_pad_multiple_does_not_change_the_loss() -> None:
    from training.train import collate

    plain = load_config("tiny", overrides=["data.pad_multiple=1"])
    padded = load_config("tiny", overrides=["data.pad_multiple=8"])
    torch.manual_seed(0)
    model = Transformer(plain.model).eval()
    examples = [([5, 6, 7], [8, 9]), ([10, 11, 12, 13, 14], [15, 16, 17, 18, 19, 20, 21, 22, 23])]
    losses = []
    for cfg in (plain, padded):
        src, tgt_in, tgt_out = collate(examples, [0, 1], cfg, torch.device("cpu"))
        assert src.shape[1] % cfg.data.pad_multiple == 0 and tgt_in.shape[1] % cfg.data.pad_multiple == 0
        _, nll = label_smoothed_nll(model(src, tgt_in), tgt_out, 0.1, cfg.model.pad_id)
        losses.append(nll.item())
    assert tuple(src.shape) == (2, 8) and tuple(tgt_in.shape) == (2, 16)
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
