"""The Transformer of "Attention Is All You Need", one module per concept, in the paper's order.

Weight names follow Marian/OPUS-MT's layout (q/k/v/out projections, fc1/fc2, a norm per sub-layer) so
that importing those checkpoints is a renaming, not a reshaping.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from training.config import ModelConfig


def sinusoidal_table(positions: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), section 3.5."""
    pos = torch.arange(positions, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = pos * inv_freq[None, :]
    table = torch.zeros(positions, d_model)
    if layout == "interleaved":
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles)
    else:  # Marian: the first half holds every sine, the second every cosine
        half = d_model // 2
        table[:, :half] = torch.sin(angles)
        table[:, half : 2 * half] = torch.cos(angles)
    return table


def causal_mask(size: int, device: torch.device | None = None) -> Tensor:
    """True where attention is forbidden: position i may only see positions <= i."""
    return torch.triu(torch.ones(size, size, dtype=torch.bool, device=device), diagonal=1)


class Embeddings(nn.Module):
    """Token embedding x sqrt(d_model) plus sinusoidal positions, then dropout (section 3.4-3.5)."""

    def __init__(self, config: ModelConfig, token: nn.Embedding):
        super().__init__()
        self.token = token
        self.scale = math.sqrt(config.d_model) if config.scale_embeddings else 1.0
        table = sinusoidal_table(config.max_positions, config.d_model, config.positional_layout)
        self.positions: Tensor
        self.register_buffer("positions", table, persistent=False)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: Tensor, offset: Tensor | int = 0) -> Tensor:
        steps = torch.arange(ids.size(1), device=ids.device) + offset
        return self.dropout(self.token(ids) * self.scale + self.positions[steps])


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over n_heads learned projections (section 3.2)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_head = config.d_model // config.n_heads
        self.q_proj = nn.Linear(config.d_model, config.d_model)
        self.k_proj = nn.Linear(config.d_model, config.d_model)
        self.v_proj = nn.Linear(config.d_model, config.d_model)
        self.out_proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.attention_dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, heads, T, d_head)"""
        return x.view(x.size(0), x.size(1), self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        return self.split_heads(self.k_proj(memory)), self.split_heads(self.v_proj(memory))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """softmax(QK^T / sqrt(d_k)) V; mask is True where a key is forbidden, broadcast to the scores."""
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = self.dropout(weights) @ v
        return out, weights

    def merge_heads(self, x: Tensor) -> Tensor:
        return self.out_proj(x.transpose(1, 2).reshape(x.size(0), x.size(2), -1))

    def forward(self, query: Tensor, memory: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        q = self.split_heads(self.q_proj(query))
        k, v = self.project_kv(memory)
        out, weights = self.attend(q, k, v, mask)
        return self.merge_heads(out), weights


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2 (section 3.3)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff)
        self.fc2 = nn.Linear(config.d_ff, config.d_model)
        activations: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}
        self.activation = activations[config.activation]
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


class Residual(nn.Module):
    """LayerNorm(x + Dropout(sublayer(x))) for post-LN; x + Dropout(sublayer(LayerNorm(x))) for pre-LN."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.pre_norm = config.pre_norm

    def forward(self, x: Tensor, sublayer) -> Tensor:  # type: ignore[no-untyped-def]
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.self_attn_norm = Residual(config)
        self.ffn = FeedForward(config)
        self.ffn_norm = Residual(config)

    def forward(self, x: Tensor, pad_mask: Tensor) -> Tensor:
        x = self.self_attn_norm(x, lambda h: self.self_attn(h, h, pad_mask)[0])
        return self.ffn_norm(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, feed-forward."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.self_attn_norm = Residual(config)
        self.cross_attn = MultiHeadAttention(config)
        self.cross_attn_norm = Residual(config)
        self.ffn = FeedForward(config)
        self.ffn_norm = Residual(config)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor, memory_mask: Tensor) -> tuple[Tensor, Tensor]:
        x = self.self_attn_norm(x, lambda h: self.self_attn(h, h, self_mask)[0])
        weights: list[Tensor] = []

        def cross(h: Tensor) -> Tensor:
            out, w = self.cross_attn(h, memory, memory_mask)
            weights.append(w)
            return out

        x = self.cross_attn_norm(x, cross)
        return self.ffn_norm(x, self.ffn), weights[0]


class Transformer(nn.Module):
    """Encoder-decoder with a shared source/target vocabulary and tied output projection."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        config.validate()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        nn.init.normal_(self.embed_tokens.weight, std=config.d_model**-0.5)
        with torch.no_grad():
            self.embed_tokens.weight[config.pad_id].zero_()
        self.encoder_embed = Embeddings(config, self.embed_tokens)
        self.decoder_embed = Embeddings(config, self.embed_tokens)
        self.encoder_layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        # Pre-LN stacks need a last norm; post-LN outputs are already normalised.
        self.encoder_norm = nn.LayerNorm(config.d_model) if config.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(config.d_model) if config.pre_norm else nn.Identity()
        if config.tie_embeddings:
            self.output_proj = None
        else:
            self.output_proj = nn.Linear(config.d_model, config.vocab_size, bias=False)
        bias = torch.zeros(config.vocab_size)
        if config.final_logits_bias:
            self.final_logits_bias = nn.Parameter(bias)
        else:
            self.register_buffer("final_logits_bias", bias, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed_tokens" not in name:
                nn.init.xavier_uniform_(p)

    def source_pad_mask(self, src: Tensor) -> Tensor:
        """(B, 1, 1, S), True at padding: broadcasts over heads and query positions."""
        return (src == self.config.pad_id)[:, None, None, :]

    def encode(self, src: Tensor) -> Tensor:
        pad_mask = self.source_pad_mask(src)
        x = self.encoder_embed(src)
        for layer in self.encoder_layers:
            x = layer(x, pad_mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in: Tensor, memory: Tensor, src: Tensor, attention_layer: int = -1) -> tuple[Tensor, Tensor]:
        """Logits (B, T, V) for teacher-forced target prefixes, and one layer's cross-attention."""
        self_mask = causal_mask(tgt_in.size(1), tgt_in.device)[None, None]
        memory_mask = self.source_pad_mask(src)
        x = self.decoder_embed(tgt_in)
        attention = []
        for layer in self.decoder_layers:
            x, w = layer(x, memory, self_mask, memory_mask)
            attention.append(w)
        return self.logits(self.decoder_norm(x)), attention[attention_layer]

    def logits(self, x: Tensor) -> Tensor:
        weight = self.embed_tokens.weight if self.output_proj is None else self.output_proj.weight
        return F.linear(x, weight) + self.final_logits_bias

    def next_token_logprobs(self, logits: Tensor) -> Tensor:
        """Log-probabilities for search: padding and BOS are never generated."""
        banned = torch.tensor([self.config.pad_id, self.config.bos_id], device=logits.device)
        logits = logits.float().index_fill(-1, banned, float("-inf"))
        return logits.log_softmax(dim=-1)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(tgt_in, self.encode(src), src)[0]


def label_smoothed_nll(logits: Tensor, target: Tensor, smoothing: float, pad_id: int) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed cross-entropy (section 5.4) and summed plain NLL, padding ignored."""
    logp = logits.float().log_softmax(dim=-1)
    keep = target != pad_id
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -logp.mean(dim=-1)
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    return loss[keep].sum(), nll[keep].sum()


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
