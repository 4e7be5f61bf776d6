"""The two graphs a bundle holds, as PyTorch modules around a trained Transformer, ready to trace.

``EncoderGraph`` runs once per batch of sentences and projects every decoder layer's cross-attention keys
and values; ``DecoderStep`` advances every hypothesis by one token with a self-attention cache. Both reuse
the model's own sub-modules (projections, ``attend``, ``Residual``) so the graphs compute what the model
computes; the tensor contract is in docs/bundle.md.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from service.bundle import cache_names
from training.model import DecoderLayer, MultiHeadAttention, Transformer

ENCODER_INPUTS = ["src_ids"]
ENCODER_OUTPUTS = ["cross_k", "cross_v", "src_mask"]
DECODER_INPUTS = ["tokens", "step", "reorder", "cross_k", "cross_v", "src_mask", "k"]
"""Fixed inputs; the self-attention cache follows, one tensor per layer: past_k_0, past_v_0, past_k_1, ..."""
DECODER_OUTPUTS = ["topk_logprobs", "topk_ids", "attention"]
"""Fixed outputs; the new cache follows: present_k_0, present_v_0, present_k_1, ..."""

ENCODER_DYNAMIC_AXES = {
    "src_ids": {0: "batch", 1: "src_len"},
    "cross_k": {1: "batch", 3: "src_len"},
    "cross_v": {1: "batch", 3: "src_len"},
    "src_mask": {0: "batch", 1: "src_len"},
}


def decoder_input_names(layers: int) -> list[str]:
    return DECODER_INPUTS + cache_names("past", layers)


def decoder_output_names(layers: int) -> list[str]:
    return DECODER_OUTPUTS + cache_names("present", layers)


def decoder_dynamic_axes(layers: int) -> dict[str, dict[int, str]]:
    axes: dict[str, dict[int, str]] = {
        "tokens": {0: "batch", 1: "hyps"},
        "reorder": {0: "rows"},
        "cross_k": {1: "batch", 3: "src_len"},
        "cross_v": {1: "batch", 3: "src_len"},
        "src_mask": {0: "batch", 1: "src_len"},
        "topk_logprobs": {0: "batch", 1: "hyps", 2: "k"},
        "topk_ids": {0: "batch", 1: "hyps", 2: "k"},
        "attention": {0: "batch", 1: "hyps", 2: "src_len"},
    }
    for name in cache_names("past", layers):
        axes[name] = {0: "past_rows", 2: "step"}
    for name in cache_names("present", layers):
        axes[name] = {0: "rows", 2: "step_plus_1"}
    return axes


def decoder_layers(model: Transformer) -> list[DecoderLayer]:
    return [cast(DecoderLayer, layer) for layer in model.decoder_layers]


class EncoderGraph(nn.Module):
    """src_ids (B, S) -> cross_k, cross_v (layers, B, heads, S, d_head) and src_mask (B, S), True at padding."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src_ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        memory = self.model.encode(src_ids)
        keys, values = [], []
        for layer in decoder_layers(self.model):
            k, v = layer.cross_attn.project_kv(memory)
            keys.append(k)
            values.append(v)
        return torch.stack(keys), torch.stack(values), src_ids == self.model.config.pad_id


class DecoderStep(nn.Module):
    """One decoding step for ``hyps`` hypotheses of each of ``batch`` sentences.

    Rows of the self-attention cache are hypotheses (``batch * hyps`` of them, sentence-major); ``reorder``
    says which row of the previous cache each hypothesis continues, so beam selection never moves the cache
    through the host. Cross-attention K/V stay one per sentence: the hypotheses of a sentence are query rows
    against its keys, (B, heads, hyps, d_head) @ (B, heads, d_head, S).
    """

    def __init__(self, model: Transformer, attention_layer: int = -1):
        super().__init__()
        self.model = model
        layers = len(model.decoder_layers)
        if not -layers <= attention_layer < layers:
            raise ValueError(f"attention_layer={attention_layer} is outside the {layers} decoder layers")
        self.attention_layer = attention_layer % layers

    def forward(
        self,
        tokens: Tensor,
        step: Tensor,
        reorder: Tensor,
        cross_k: Tensor,
        cross_v: Tensor,
        src_mask: Tensor,
        k: Tensor,
        *past: Tensor,
    ) -> tuple[Tensor, ...]:
        """``past`` is the cache as (k, v) per layer, each (rows, heads, step, d_head). One tensor per layer,
        not a stacked (layers, ...) one: slicing and restacking a stacked cache copies it twice more per
        step, which profiling showed to cost a third of the decoder's time (docs/profile-decode.md)."""
        model = self.model
        batch, hyps = tokens.size(0), tokens.size(1)
        d_model = model.config.d_model
        x = model.decoder_embed(tokens.reshape(-1, 1), offset=step)  # (rows, 1, d_model)
        memory_mask = src_mask[:, None, None, :]
        present: list[Tensor] = []
        attention: list[Tensor] = []
        for i, layer in enumerate(decoder_layers(model)):

            def self_attention(h: Tensor, i: int = i, attn: MultiHeadAttention = layer.self_attn) -> Tensor:
                q = attn.split_heads(attn.q_proj(h))
                k_new, v_new = attn.project_kv(h)
                keys = torch.cat([past[2 * i].index_select(0, reorder), k_new], dim=2)
                values = torch.cat([past[2 * i + 1].index_select(0, reorder), v_new], dim=2)
                present.extend((keys, values))
                out, _ = attn.attend(q, keys, values, None)  # the newest token may see every cached one
                return attn.merge_heads(out)

            def cross_attention(h: Tensor, i: int = i, attn: MultiHeadAttention = layer.cross_attn) -> Tensor:
                q = attn.split_heads(attn.q_proj(h))  # (B, hyps, d) -> (B, heads, hyps, d_head)
                out, weights = attn.attend(q, cross_k[i], cross_v[i], memory_mask)
                if i == self.attention_layer:
                    attention.append(weights.mean(dim=1))
                return attn.merge_heads(out)  # (B, hyps, d_model)

            x = layer.self_attn_norm(x, self_attention)
            x = layer.cross_attn_norm(x.reshape(batch, hyps, d_model), cross_attention)
            x = layer.ffn_norm(x, layer.ffn).reshape(-1, 1, d_model)
        logits = model.logits(model.decoder_norm(x)).reshape(batch, hyps, -1)
        # k stays a tensor so that the traced graph takes it as an input, not a constant
        top_lp, top_ids = model.next_token_logprobs(logits).topk(k, dim=-1)  # type: ignore[arg-type]
        return (top_lp, top_ids, attention[0].float(), *present)


def encoder_example(model: Transformer, batch: int = 2, src_len: int = 5) -> tuple[Tensor]:
    cfg = model.config
    src = torch.randint(4, cfg.vocab_size, (batch, src_len))
    src[:, -1] = cfg.eos_id
    src[0, -2:] = cfg.pad_id
    return (src,)


def decoder_example(
    model: Transformer, batch: int = 2, hyps: int = 3, src_len: int = 5, step: int = 3
) -> tuple[Tensor, ...]:
    """Inputs with every dynamic axis above 1 so tracing specialises none of them."""
    cfg = model.config
    heads, d_head = cfg.n_heads, cfg.d_model // cfg.n_heads
    rows = batch * hyps
    cross = torch.randn(cfg.decoder_layers, batch, heads, src_len, d_head)
    src_mask = torch.zeros(batch, src_len, dtype=torch.bool)
    src_mask[0, -2:] = True
    return (
        torch.randint(4, cfg.vocab_size, (batch, hyps)),
        torch.tensor(step, dtype=torch.long),
        torch.randperm(rows),
        cross,
        cross.clone(),
        src_mask,
        torch.tensor(min(4, cfg.vocab_size), dtype=torch.long),
        *(torch.randn(rows, heads, step, d_head) for _ in range(2 * cfg.decoder_layers)),
    )
