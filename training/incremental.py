"""The model's incremental forward: the encoder once, then one decoder step at a time with a key/value cache.

``EncoderGraph`` runs once per batch of sentences and projects every decoder layer's cross-attention keys
and values; ``DecoderStep`` advances every hypothesis by one token with a self-attention cache. Training
decodes its dev set with them (training.cached_decode) and the export traces them into a bundle's two main
graphs (training.export.trace). Both reuse
the model's own sub-modules (projections, ``attend``, ``Residual``) so the graphs compute what the model
computes; the tensor contract is in docs/bundle.md.
"""

from __future__ import annotations

import functools
import math
from typing import cast

import torch
from torch import Tensor, nn

from core.graphs import GraphSpec, graph_spec
from training.fused import BeamCachedAttention, CachedSelfAttention, KeyMaskedAttention
from training.model import DecoderLayer, EncoderLayer, FeedForward, MultiHeadAttention, Transformer


def spec(role: str, model: Transformer) -> GraphSpec:
    """The contract (core/graphs.py) of ``role`` with this model's sizes: only batch and length axes dynamic."""
    cfg = model.config
    return graph_spec(role, cfg.decoder_layers, cfg.n_heads, cfg.d_model // cfg.n_heads)


def decoder_layers(model: Transformer) -> list[DecoderLayer]:
    return [cast(DecoderLayer, layer) for layer in model.decoder_layers]


def _linear(x: Tensor, layer: nn.Linear) -> Tensor:
    """``layer(x)`` for 2-D rows, traced as MatMul + Add rather than Gemm: onnxruntime fuses the pair into one
    Gemm when it loads an fp32 graph, and dynamic int8 quantization only quantizes MatMul, not Gemm."""
    out = x @ layer.weight.t()
    return out if layer.bias is None else out + layer.bias


def _fused_linear(x: Tensor, layers: list[nn.Linear]) -> Tensor:
    """``torch.cat([layer(x) for layer in layers], -1)`` as one GEMM over the concatenated weights (folded into
    one constant at export): one larger product is faster than several small ones on the same rows."""
    product, bias = _fused_product(x, layers)
    return product + bias


def _fused_product(x: Tensor, layers: list[nn.Linear]) -> tuple[Tensor, Tensor]:
    """``_fused_linear`` as its product and its bias apart, for a kernel that adds the bias itself (the fused
    attention's, training/fused.py)."""
    weight = torch.cat([layer.weight for layer in layers])
    bias = torch.cat(
        [layer.bias if layer.bias is not None else layer.weight.new_zeros(len(layer.weight)) for layer in layers]
    )
    return x @ weight.t(), bias


def _linears(x: Tensor, layers: list[nn.Linear]) -> list[Tensor]:
    """``[layer(x) for layer in layers]``, as one GEMM then a split."""
    return list(_fused_linear(x, layers).split([len(layer.weight) for layer in layers], dim=-1))


class EncoderGraph(nn.Module):
    """src_ids (B, S) -> src_mask (B, S), True at padding, then per decoder layer its cross-attention keys
    and values, each (B, heads, S, d_head): cross_k_0, cross_v_0, cross_k_1, ...

    One tensor per layer, not a stacked (layers, ...) one: slicing a layer out of a stacked input is a copy
    inside onnxruntime, which profiling showed to cost 9 % of every decoder step
    (docs/reports/profile-decode/report.md).
    The encoder is ``Transformer.encode`` (its embeddings, weights, ``attend`` and residual blocks) written on
    2-D rows like ``DecoderStep``, so its projections become fused Gemms too.

    Padding is removed from the position-wise work: embeddings, projections, feed-forward blocks and norms run
    on the N real tokens of the batch, packed as (N, d_model) rows, and only the attention products see the
    padded (B, heads, S, d_head) layout, with zeros at padding (masked there, so they never count). In batches of
    test sentences taken in file order a third of the positions are padding (docs/reports/profile-decode/report.md).
    """

    def __init__(self, model: Transformer, fused: bool = False, pack: bool = True):
        super().__init__()
        self.model = model
        self.fused = fused
        """Each self-attention as one onnxruntime ``MultiHeadAttention`` node when traced (training/fused.py)."""
        self.pack = pack
        """Padding removed from the position-wise work (above). The GPU set's encoder does not: on CUDA the
        NonZero that finds the real tokens makes onnxruntime wait for the device and copy to the host in the middle
        of the graph, and the gathers and scatters around every layer are launches, while the padding's arithmetic
        is nearly free there. Padding rows then hold finite values that every attention masks."""

    def forward(self, src_ids: Tensor) -> tuple[Tensor, ...]:
        model = self.model
        batch, length = src_ids.size(0), src_ids.size(1)
        rows, d_model = batch * length, model.config.d_model
        heads, d_head = model.config.n_heads, d_model // model.config.n_heads
        is_pad = src_ids == model.config.pad_id
        pad_mask = is_pad[:, None, None, :]  # model.source_pad_mask
        real = (~is_pad).reshape(rows).nonzero().squeeze(1) if self.pack else None  # (N,) rows of real tokens

        def packed(x: Tensor) -> Tensor:  # (rows, c) -> the real tokens' (N, c)
            return x if real is None else x.index_select(0, real)

        def padded(x: Tensor) -> Tensor:  # (N, c) -> (rows, c), zeros at padding
            return x if real is None else x.new_zeros(rows, x.size(1)).index_put((real,), x)

        def split(x: Tensor) -> list[Tensor]:  # packed (N, c * d_model) -> c tensors (B, heads, S, d_head)
            return [t.reshape(batch, length, heads, d_head).transpose(1, 2) for t in padded(x).split(d_model, dim=-1)]

        keep = (~is_pad).to(torch.int32)  # (B, S), 1 at a real token: the fused kernel's key mask
        x = packed(model.encoder_embed(src_ids).reshape(rows, d_model))
        for layer in cast(list[EncoderLayer], list(model.encoder_layers)):

            def self_attention(h: Tensor, attn: MultiHeadAttention = layer.self_attn) -> Tensor:
                if self.fused:  # (B, S, d_model) in and out, the heads split and merged inside the kernel
                    product, bias = _fused_product(h, [attn.q_proj, attn.k_proj, attn.v_proj])
                    q, k, v = padded(product).reshape(batch, length, -1).split(d_model, dim=-1)
                    out, _ = KeyMaskedAttention.apply(q, k, v, bias, keep, heads)
                    return _linear(packed(out.reshape(rows, d_model)), attn.out_proj)
                q, k, v = split(_fused_linear(h, [attn.q_proj, attn.k_proj, attn.v_proj]))
                out, _ = attn.attend(q, k, v, pad_mask)
                return _linear(packed(out.transpose(1, 2).reshape(rows, d_model)), attn.out_proj)

            x = layer.self_attn_norm(x, self_attention)
            x = layer.ffn_norm(x, functools.partial(_feed_forward, ffn=layer.ffn))
        memory = model.encoder_norm(x)
        projections = [p for layer in decoder_layers(model) for p in (layer.cross_attn.k_proj, layer.cross_attn.v_proj)]
        return (is_pad, *split(_fused_linear(memory, projections)))


def _feed_forward(h: Tensor, ffn: FeedForward) -> Tensor:
    return _linear(ffn.activation(_linear(h, ffn.fc1)), ffn.fc2)


class DecoderStep(nn.Module):
    """One decoding step for ``hyps`` hypotheses of each of ``batch`` sentences.

    Rows of the self-attention cache are hypotheses (``batch * hyps`` of them, sentence-major); ``reorder``
    says which row of the previous cache each hypothesis continues, so beam selection never moves the cache
    through the host. ``positions`` holds each sentence's step: sentences admitted later share the call, their
    cache columns right-aligned (a sentence at position ``p`` owns the last ``p`` of the ``T`` cached
    columns, core/graphs.py), and the self-attention mask hides the columns before them.
    Cross-attention K/V stay one per sentence: the hypotheses of a sentence are query rows
    against its keys, (B, heads, hyps, d_head) @ (B, heads, d_head, S).

    The computation is the model's (its weights, ``attend``, its residual blocks), written on 2-D
    (rows, d_model) activations so every projection is one GEMM; tokens the search may never produce (padding,
    BOS) get a -inf bias folded into the output bias instead of a scatter over the logits.
    """

    def __init__(
        self,
        model: Transformer,
        attention_layer: int = -1,
        static: bool = False,
        logits: bool = False,
        fused: bool = False,
        masked: bool = False,
        static_masked: bool = False,
    ):
        super().__init__()
        self.model = model
        self.fused = fused
        self.masked = masked
        """The self-attention cache never moves (training/fused.py ``BeamCachedAttention``, not yet in any bundle:
        bench/gpu_session/masked_step.py): ``reorder`` is then the beam index (batch, hyps, C) int32, and ``memory``
        starts with ``own`` (rows, t + 1) int32 and ``step`` (1,) int32 before the cross K/V; the cache is the
        set's buffers of C columns, column ``t`` written in place."""
        """Each attention as one onnxruntime ``MultiHeadAttention`` node when traced (training/fused.py)."""
        self.logits = logits
        """Return (logits (rows, 1, vocab), *present) instead of the top-k and attention: what onnxruntime's own
        BeamSearch operator wants from its decoder (training/export/ort_beam_search.py)."""
        self.static = static
        """The static-shape step (core/graphs.py, ``static_decoder``): the cache keeps its ``T`` columns, the
        oldest dropped as the new one is appended, so every step has the same shapes and a GPU can replay it
        as one captured graph. Each sentence's own columns are the last ``position + 1``, as before."""
        self.static_masked = static_masked
        """The static step's self-attention as onnxruntime's ``DecoderMaskedMultiHeadAttention`` (with ``static`` and
        ``fused``): the gathered window of C columns (its last a placeholder) becomes the present with the new key and
        value written into that last column, and one kernel attends over it (training/fused.py
        ``BeamCachedAttention``, with a beam index of each row's own hypothesis), where ``MultiHeadAttention``
        concatenates and transposes in several. The same arithmetic; one input more, last, ``key_layout``
        (core/graphs.py ``KEY_LAYOUT``), whose shape says how the key caches lie: CUDA's kernel keeps keys as (rows,
        heads, d_head / x, C, x), the CPU's plain, and the window's gather follows either; and the windows as outputs
        more, last (``WINDOW``), which the engine binds to the present's buffers: the kernel then copies nothing."""
        layers = len(model.decoder_layers)
        if not -layers <= attention_layer < layers:
            raise ValueError(f"attention_layer={attention_layer} is outside the {layers} decoder layers")
        self.attention_layer = attention_layer % layers
        bias = model.final_logits_bias.detach().clone()
        bias[[model.config.pad_id, model.config.bos_id]] = float("-inf")  # as Transformer.next_token_logprobs
        self.register_buffer("search_bias", bias, persistent=False)

    def forward(
        self, tokens: Tensor, positions: Tensor, reorder: Tensor, k: Tensor, src_mask: Tensor, *memory: Tensor
    ) -> tuple[Tensor, ...]:
        """``memory`` is the encoder's cross K/V per layer (cross_k_0, cross_v_0, ...), then the self-attention
        cache per layer (past_k_0, past_v_0, ...), each (rows, heads, step, d_head)."""
        model = self.model
        layers = decoder_layers(model)
        if self.masked:
            own, step, *memory = memory  # type: ignore[assignment]
        key_layout: Tensor | None = None
        if self.static_masked:  # its shape is the key caches' layout (core/graphs.py KEY_LAYOUT)
            *memory, key_layout = memory  # type: ignore[assignment]
        cross, past = memory[: 2 * len(layers)], memory[2 * len(layers) :]

        batch, hyps = tokens.size(0), tokens.size(1)
        d_model = model.config.d_model
        heads, d_head = model.config.n_heads, d_model // model.config.n_heads
        # Reshapes use -1 for the row count wherever they can: a traced dynamic size is a chain of Shape,
        # Gather, Unsqueeze and Concat nodes per use, and every node costs a few microseconds per step.
        # Each row's position (rows, 1). ``expand_as`` rather than ``expand(-1, hyps)``: the -1 costs an Equal
        # and a Where per step in the traced graph.
        offsets = positions[:, None].expand_as(tokens).reshape(-1, 1)
        # The decoder's embedding (Embeddings.forward for one token at ``offset``), written on rows: a position
        # table lookup by row rather than a range added to the offset.
        embed = model.decoder_embed
        x = embed.dropout(embed.token(tokens.reshape(-1)) * embed.scale + embed.positions[offsets.reshape(-1)])
        # Key j of the C a row sees (C = T + 1, or T when static) is its sentence's when j >= C - 1 - position
        # (the cache is right-aligned).
        cached = past[0].size(2)
        width = cached if self.static else cached + 1
        column = torch.arange(width, device=tokens.device)
        one, zero = torch.ones((), dtype=torch.int32), torch.zeros((), dtype=torch.int32)
        own_table: Tensor | None = None
        if self.static:
            # Each row's mask looked up by its position in a (C, C) table made of the shape alone: with a bucket's
            # dimensions fixed onnxruntime folds the table to a constant, and a step runs one Gather where it ran
            # a Sub, a Less and a Where (each a kernel of a replay). Row p of the table: a sentence at position p,
            # which is below C in a static step (``static_example``).
            table = column[None, :] < width - 1 - column[:, None]  # (C, C), True: not its own
            not_own = table.index_select(0, offsets.reshape(-1))  # (rows, C)
            if self.fused:  # the kernel's int32 key mask, looked up the same way
                own_table = torch.where(table, zero, one).index_select(0, offsets.reshape(-1))
        else:
            not_own = column < width - 1 - offsets  # (rows, C), True: not its own
        self_mask = not_own[:, None, None, :] if not self.masked else None

        shifted: Tensor | None = None
        window = cached - 1  # the past columns a static step reads: its window drops the oldest
        if self.static:
            # The static step's past is each row's continued row without its oldest column: one Gather of d_head-wide
            # slices, through an index made once a step for every cache, where a Gather of whole rows and then a
            # Slice each copied the cache twice (at batch 128 and 64 columns, 17 MB a cache in fp16). With
            # ``static_masked`` the window keeps C columns, the last a placeholder the kernel writes the new one into.
            first = (reorder * (heads * cached))[:, None, None]  # (rows, 1, 1): the row's first slice
            taken = column[1:cached]
            if self.static_masked:
                window, taken = cached, torch.cat([taken, column[cached - 1 :]])
            within = torch.arange(heads, device=tokens.device)[:, None] * cached + taken  # (heads, window)
            shifted = (first + within).reshape(-1)
        key_shifted: Tensor | None = None
        key_width = d_head
        if key_layout is not None:
            # The keys the kernel reads, seen as (rows, heads, a, C, b) (core/graphs.py KEY_LAYOUT; a and b fold to
            # constants per session): the same window gathered in b-wide slices, so that the keys stay in the
            # layout of the provider's kernel; plain (1, d_head) is the index above.
            a, key_width = key_layout.size(0), key_layout.size(1)
            lanes = torch.arange(heads, device=tokens.device)[:, None] * a + torch.arange(a, device=tokens.device)
            key_first = (reorder * (heads * a * cached))[:, None, None, None]  # (rows, 1, 1, 1)
            key_shifted = (key_first + (lanes[:, :, None] * cached + taken)).reshape(-1)  # (rows, heads, a, window)

        def cached_rows(t: Tensor, key: bool = False) -> Tensor:  # the rows' past, without the oldest column if static
            if key and key_shifted is not None:
                return t.reshape(-1, key_width).index_select(0, key_shifted).reshape(-1, heads, window, d_head)
            if shifted is not None:
                return t.reshape(-1, d_head).index_select(0, shifted).reshape(-1, heads, window, d_head)
            return t.index_select(0, reorder)

        memory_mask = src_mask[:, None, None, :]
        if self.fused:  # the kernel's key masks, once for every layer: int32, 1 at a key the row may see
            # A Where between two int32 constants: one node each, where a Not and a Cast would be two.
            if not self.masked:  # (a masked step takes its own, one column a step it has seen)
                own = own_table if own_table is not None else torch.where(not_own, zero, one)  # (rows, C)
            keep = torch.where(src_mask, zero, one)  # (B, S)
        own_beams: Tensor | None = None
        last: Tensor | None = None
        if self.static and self.fused and self.static_masked:
            # each row reads only its own hypothesis' row (the gather already reordered the window), and the kernel
            # writes the window's last column: int32, as onnxruntime reads them
            own_beams = torch.arange(hyps, device=tokens.device, dtype=torch.int32)[None, :, None].expand(
                batch, hyps, cached
            )
            last = torch.full((1,), 1, dtype=torch.int32, device=tokens.device) * (cached - 1)
        present: list[Tensor] = []
        windows: list[Tensor] = []  # with static_masked: each layer's gathered window (core/graphs.py WINDOW)
        attention: list[Tensor] = []
        for i, layer in enumerate(layers):

            def self_attention(h: Tensor, i: int = i, attn: MultiHeadAttention = layer.self_attn) -> Tensor:
                q, k_new, v_new = (
                    t.reshape(-1, heads, 1, d_head) for t in _linears(h, [attn.q_proj, attn.k_proj, attn.v_proj])
                )
                keys = torch.cat([cached_rows(past[2 * i]), k_new], dim=2)
                values = torch.cat([cached_rows(past[2 * i + 1]), v_new], dim=2)
                present.extend((keys, values))
                out, _ = attn.attend(q, keys, values, self_mask)
                return _linear(out.reshape(-1, d_model), attn.out_proj)

            def cross_attention(h: Tensor, i: int = i, attn: MultiHeadAttention = layer.cross_attn) -> Tensor:
                q = _linear(h, attn.q_proj).reshape(batch, -1, heads, d_head).transpose(1, 2)
                out, weights = attn.attend(q, cross[2 * i], cross[2 * i + 1], memory_mask)
                if i == self.attention_layer:
                    attention.append(weights.mean(dim=1))
                return _linear(out.transpose(1, 2).reshape(-1, d_model), attn.out_proj)

            def fused_self_attention(h: Tensor, i: int = i, attn: MultiHeadAttention = layer.self_attn) -> Tensor:
                product, bias = _fused_product(h, [attn.q_proj, attn.k_proj, attn.v_proj])
                q, k_new, v_new = product.reshape(-1, 1, 3 * d_model).split(d_model, dim=-1)  # (rows, 1, d_model)
                past_k, past_v = cached_rows(past[2 * i], key=True), cached_rows(past[2 * i + 1])
                if own_beams is not None:  # the window's last column written and attended in one kernel
                    out, keys, values = BeamCachedAttention.apply(
                        q, k_new, v_new, bias, own, past_k, past_v, last, own_beams, heads
                    )
                    windows.extend((past_k, past_v))
                else:
                    out, keys, values = CachedSelfAttention.apply(q, k_new, v_new, bias, own, past_k, past_v, heads)
                present.extend((keys, values))
                return _linear(out.reshape(-1, d_model), attn.out_proj)

            def fused_cross_attention(h: Tensor, i: int = i, attn: MultiHeadAttention = layer.cross_attn) -> Tensor:
                q = _linear(h, attn.q_proj).reshape(batch, -1, d_model)
                out, _ = KeyMaskedAttention.apply(q, cross[2 * i], cross[2 * i + 1], None, keep, heads)
                if i == self.attention_layer:
                    # The reported weights from the model's own operators, not from the kernel's scores output:
                    # onnxruntime's CUDA MultiHeadAttention returns other scores there than its CPU kernel
                    # (measured on an H200, onnxruntime 1.31: the same tokens, attention rows far apart).
                    # One layer's query-key product a step: a small cost.
                    heads_q = q.reshape(batch, -1, heads, d_head).transpose(1, 2)
                    scores = heads_q @ cross[2 * i].transpose(-2, -1) / math.sqrt(d_head)
                    attention.append(scores.masked_fill(memory_mask, float("-inf")).softmax(dim=-1).mean(dim=1))
                return _linear(out.reshape(-1, d_model), attn.out_proj)

            def masked_self_attention(h: Tensor, i: int = i, attn: MultiHeadAttention = layer.self_attn) -> Tensor:
                q, k_new, v_new = (
                    t.reshape(-1, 1, d_model) for t in _linears(h, [attn.q_proj, attn.k_proj, attn.v_proj])
                )
                out, keys, values = BeamCachedAttention.apply(
                    q, k_new, v_new, None, own, past[2 * i], past[2 * i + 1], step, reorder
                )
                present.extend((keys, values))
                return _linear(out.reshape(-1, d_model), attn.out_proj)

            if self.fused:
                self_attention, cross_attention = fused_self_attention, fused_cross_attention
            if self.masked:
                self_attention = masked_self_attention
            x = layer.self_attn_norm(x, self_attention)
            x = layer.cross_attn_norm(x, cross_attention)
            x = layer.ffn_norm(x, functools.partial(_feed_forward, ffn=layer.ffn))
        weight = model.embed_tokens.weight if model.output_proj is None else model.output_proj.weight
        logits = (model.decoder_norm(x) @ weight.t() + self.search_bias).float()
        if self.logits:
            return (logits[:, None, :], *present)
        # k stays a tensor so that the traced graph takes it as an input, not a constant. (Top-k logits
        # minus a log-sum-exp would write less, but onnxruntime's ReduceLogSumExp is 10x slower than LogSoftmax.)
        logprobs = logits.log_softmax(dim=-1)
        top_lp, top_ids = logprobs.topk(k, dim=-1)  # type: ignore[arg-type]
        return (
            top_lp.reshape(batch, hyps, -1),
            top_ids.reshape(batch, hyps, -1),
            attention[0].float(),
            *present,
            *windows,
        )


def encoder_example(model: Transformer, batch: int = 2, src_len: int = 5) -> tuple[Tensor]:
    cfg = model.config
    src = torch.randint(4, cfg.vocab_size, (batch, src_len))
    src[:, -1] = cfg.eos_id
    src[0, -2:] = cfg.pad_id
    return (src,)


def decoder_example(
    model: Transformer, batch: int = 2, hyps: int = 3, src_len: int = 5, step: int = 3
) -> tuple[Tensor, ...]:
    """Inputs with every dynamic axis above 1 so tracing specialises none of them; the sentences are at
    different positions so the cache mask is exercised."""
    cfg = model.config
    heads, d_head = cfg.n_heads, cfg.d_model // cfg.n_heads
    rows = batch * hyps
    src_mask = torch.zeros(batch, src_len, dtype=torch.bool)
    src_mask[0, -2:] = True
    return (
        torch.randint(4, cfg.vocab_size, (batch, hyps)),
        torch.tensor([step, 1] + [step] * (batch - 2), dtype=torch.long),
        torch.randperm(rows),
        torch.tensor(min(4, cfg.vocab_size), dtype=torch.long),
        src_mask,
        *(torch.randn(batch, heads, src_len, d_head) for _ in range(2 * cfg.decoder_layers)),
        *(torch.randn(rows, heads, step, d_head) for _ in range(2 * cfg.decoder_layers)),
    )


def static_example(model: Transformer, **sizes: int) -> tuple[Tensor, ...]:
    """``decoder_example`` for the static step (``DecoderStep(static=True)``): every position below the cache's
    width ``step``, its rule (a sentence at position p owns the last p + 1 of the columns, so p < columns; the
    engine moves a set to a wider bucket first), which the step's mask table relies on."""
    tokens, positions, *rest = decoder_example(model, **sizes)
    width = rest[-1].size(2)
    return (tokens, positions.clamp(max=width - 1), *rest)


def masked_example(model: Transformer, columns: int = 8, seen: int = 4) -> tuple[Tensor, ...]:
    """Inputs of ``DecoderStep(masked=True)`` (core/graphs.py ``MASKED_STEP``): ``decoder_example``'s tokens, k,
    source and memory, every sentence at step ``seen - 1`` of buffers of ``columns`` columns, beams at random."""
    tokens, positions, _, k, src_mask, *rest = decoder_example(model)
    cross = rest[: 2 * model.config.decoder_layers]
    batch, hyps = tokens.shape
    heads, d_head = cross[0].size(1), cross[0].size(3)
    return (
        tokens,
        torch.full_like(positions, seen - 1),
        torch.randint(0, hyps, (batch, hyps, columns), dtype=torch.int32),
        k,
        src_mask,
        torch.ones(batch * hyps, seen, dtype=torch.int32),
        torch.tensor([seen - 1], dtype=torch.int32),
        *cross,
        *(torch.randn(batch * hyps, heads, columns, d_head) for _ in range(2 * model.config.decoder_layers)),
    )
