"""The training loop: token-count batches, label smoothing, Adam + inverse-sqrt warm-up, exact resume.

One script for one CPU, one GPU or several GPUs: under ``torchrun`` it trains with
DistributedDataParallel, each rank taking every world_size-th batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import signal
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from core.tokenizer import Tokenizer
from training import checkpoint
from training.cached_decode import cached_greedy
from training.config import Config, dump_toml
from training.curves import RunBoard
from training.data import Example, encode_pairs, padded_width, read_pairs, token_batches
from training.decode import strip_eos
from training.literals import filled_copies, placeholder_copies
from training.model import Transformer, count_parameters, label_smoothed_nll

log = logging.getLogger("training")


def inverse_sqrt(step: int, d_model: int, warmup: int, scale: float) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (section 5.3)."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@dataclass
class Position:
    """Where training is: enough to resume exactly after a kill."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    elapsed: float = 0.0
    best_chrf: float = -1.0
    history: list[dict[str, Any]] = field(default_factory=list)


BF16_MARGIN = 1.05
"""How much faster than float32 a probed bf16 step must be for a CPU run to take it (``Trainer._bf16_pays``)."""


def cpu_has_native_bf16() -> bool:
    """True when this CPU multiplies bf16 in hardware (AMX or AVX512-BF16), where bf16 autocast may train faster
    than float32 (1.26-1.34x on AMD EPYC VMs, 0.73x on a Xeon without AMX: docs/default-model.md, hence the probe
    ``Trainer._bf16_pays``); elsewhere it would be emulated."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8").split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def collate(
    examples: list[Example], indices: list[int], cfg: Config, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src with EOS, decoder input BOS+y, decoder target y+EOS), right-padded to ``data.pad_multiple``."""
    m, multiple = cfg.model, cfg.data.pad_multiple
    rows = [examples[i] for i in indices]
    src_w = padded_width(max(len(s) for s, _ in rows) + 1, multiple)
    tgt_w = padded_width(max(len(t) for _, t in rows) + 1, multiple)
    src = torch.full((len(rows), src_w), m.pad_id, dtype=torch.long)
    tgt_in = torch.full((len(rows), tgt_w), m.pad_id, dtype=torch.long)
    tgt_out = torch.full((len(rows), tgt_w), m.pad_id, dtype=torch.long)
    for r, (s, t) in enumerate(rows):
        src[r, : len(s) + 1] = torch.tensor(s + [m.eos_id])
        tgt_in[r, : len(t) + 1] = torch.tensor([m.bos_id] + t)
        tgt_out[r, : len(t) + 1] = torch.tensor(t + [m.eos_id])
    return src.to(device), tgt_in.to(device), tgt_out.to(device)


@torch.no_grad()
def evaluate_dev(
    model: Transformer,
    cfg: Config,
    dev: list[Example],
    dev_refs: list[str],
    tokenizer: Tokenizer,
    device: torch.device,
) -> dict[str, float]:
    """Dev loss/perplexity on all of dev, BLEU/chrF of greedy output on the first sentences."""
    import sacrebleu

    model.eval()
    total_nll, total_tokens = 0.0, 0
    for indices in token_batches(dev, cfg.train.batch_tokens, seed=0, epoch=0, multiple=cfg.data.pad_multiple):
        src, tgt_in, tgt_out = collate(dev, indices, cfg, device)
        logits = model(src, tgt_in)
        _, nll = label_smoothed_nll(logits, tgt_out, 0.0, cfg.model.pad_id)
        total_nll += float(nll)
        total_tokens += int((tgt_out != cfg.model.pad_id).sum())
    n = min(cfg.data.dev_bleu_sentences, len(dev))
    hyps: list[str] = []
    for start in range(0, n, 64):
        sources = [s for s, _ in dev[start : min(n, start + 64)]]
        # Early models rarely stop by themselves: a tight cap keeps dev evaluation from eating the budget.
        lens = [min(cfg.model.max_positions, int(1.5 * len(s)) + 5) for s in sources]
        outs = cached_greedy(model, sources, lens)
        hyps += [tokenizer.decode(strip_eos(o.tokens, cfg.model.eos_id)) for o in outs]
    refs = dev_refs[:n]
    model.train()
    loss = total_nll / max(1, total_tokens)
    return {
        "dev_loss": loss,
        "dev_ppl": math.exp(min(loss, 50)),
        "dev_bleu": sacrebleu.corpus_bleu(hyps, [refs]).score if n else 0.0,
        "dev_chrf": sacrebleu.corpus_chrf(hyps, [refs]).score if n else 0.0,
    }


class Trainer:
    def __init__(self, cfg: Config, run_dir: str | Path):
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.board = RunBoard(self.run_dir)
        self.budget_spent = False
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            self.device = torch.device("cuda", local)
        else:
            self.device = torch.device("cpu")
            if cfg.train.threads:
                torch.set_num_threads(cfg.train.threads)
        self.is_main = self.rank == 0
        if not self.is_main:  # one voice: the other ranks say only what goes wrong
            logging.getLogger("training").setLevel(logging.WARNING)
        self.stop_requested = False
        self.trace = (self.run_dir / f"trace-rank{self.rank}.jsonl") if cfg.train.trace else None

    def load_data(self) -> None:
        cfg = self.cfg
        self.tokenizer = Tokenizer(cfg.data.vocab)
        if len(self.tokenizer) != cfg.model.vocab_size:
            log.info("model.vocab_size %d -> %d (the vocabulary's size)", cfg.model.vocab_size, len(self.tokenizer))
            cfg.model.vocab_size = len(self.tokenizer)
        sp = self.tokenizer.specials
        cfg.model.pad_id, cfg.model.unk_id = sp.pad_id, sp.unk_id
        cfg.model.bos_id, cfg.model.eos_id = sp.bos_id, sp.eos_id
        limit = min(cfg.data.max_source_pieces, cfg.model.max_positions)
        target_limit = min(cfg.data.max_target_pieces, cfg.model.max_positions)
        pairs = read_pairs(cfg.data.train)
        for path in cfg.data.extra:
            extra = read_pairs(path)
            pairs += extra * cfg.data.extra_copies
            log.info("extra: %d pairs from %s, %d times more", len(extra), path, cfg.data.extra_copies)
        filled = filled_copies(pairs, cfg.data.placeholder_fills, cfg.train.seed)
        if filled:
            log.info("placeholder_fills=%d: %d filled copies added", cfg.data.placeholder_fills, len(filled))
        copied = placeholder_copies(pairs, cfg.data.placeholder_copies, cfg.train.seed)
        if copied:
            log.info("placeholder_copies=%g: %d copies with {n} added", cfg.data.placeholder_copies, len(copied))
        filled += copied
        self.train, dropped = encode_pairs(self.tokenizer, pairs + filled, limit, target_limit)
        if cfg.data.synthetic:
            tag = [sp.bos_id] if cfg.data.tag_synthetic else []
            synthetic = read_pairs(cfg.data.synthetic)
            synthetic += filled_copies(synthetic, cfg.data.placeholder_fills, cfg.train.seed + 1)
            synthetic += placeholder_copies(synthetic, cfg.data.placeholder_copies, cfg.train.seed + 1)
            encoded, too_long = encode_pairs(self.tokenizer, synthetic, limit - len(tag), target_limit)
            self.train += [(tag + src, tgt) for src, tgt in encoded]
            dropped += too_long
            log.info("synthetic: %d pairs from %s%s", len(encoded), cfg.data.synthetic, " (tagged)" if tag else "")
        if not self.train:
            raise ValueError(f"{cfg.data.train}: no pair fits the length limits; nothing to train on")
        dev_pairs = read_pairs(cfg.data.dev)
        # Dev keeps every pair that fits, in file order, so BLEU is comparable across runs.
        self.dev, self.dev_refs = [], []
        for src, tgt in dev_pairs:
            s, t = self.tokenizer.encode_source(src), self.tokenizer.encode_target(tgt)
            if s and t and len(s) < limit and len(t) < target_limit:
                self.dev.append((s, t))
                self.dev_refs.append(tgt)
        log.info(
            "train: %d pairs (%d over the length limits dropped), dev: %d pairs",
            len(self.train),
            dropped,
            len(self.dev),
        )

    def build(self) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        np.random.seed(cfg.train.seed)
        self.model = Transformer(cfg.model).to(self.device)
        self.module = self.model
        if self.world > 1:
            self.model = torch.nn.parallel.DistributedDataParallel(  # type: ignore[assignment]
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
            torch.manual_seed(cfg.train.seed + self.rank)  # same weights (DDP copies rank 0's), own dropout masks
        t = cfg.train
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=1.0,
            betas=t.adam_betas,
            eps=t.adam_eps,
            weight_decay=t.weight_decay,
        )
        if self.device.type == "cuda":
            self.use_amp = t.amp
            self.amp_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        else:  # bf16 where the CPU computes it natively and a probe finds it faster, or as the run began (fit)
            self.use_amp = False
            self.amp_dtype = torch.bfloat16
        self.amp_resumed: bool | None = None
        """The precision a resumed run began with (its checkpoint's), which it keeps; None for a new run."""
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_amp and self.amp_dtype == torch.float16)
        self.pos = Position()

    def _choose_precision(self) -> None:
        """On the CPU: bf16 autocast when the CPU computes bf16 natively and a training step is faster with it
        (``_bf16_pays``), decided once when a run begins (rank 0's probe for every rank) and kept when it resumes,
        so that a resumed run trains as the uninterrupted one would. Logged either way."""
        t = self.cfg.train
        if self.device.type != "cuda":
            if self.amp_resumed is not None:
                self.use_amp = self.amp_resumed
            else:
                # Only rank 0 times (every rank's probe at once would share the cores it times); the others wait.
                self.use_amp = self.is_main and t.amp and cpu_has_native_bf16() and self._bf16_pays()
                if self.world > 1:
                    decided = torch.tensor([int(self.use_amp)])
                    dist.broadcast(decided, 0)
                    self.use_amp = bool(decided.item())
        precision = str(self.amp_dtype).removeprefix("torch.") + " autocast" if self.use_amp else "float32"
        log.info("precision: %s on %s", precision, self.device.type)

    def _bf16_pays(self, rounds: int = 3) -> bool:
        """Whether a training step under bf16 autocast is faster than in float32 on this CPU (by ``BF16_MARGIN``:
        float32 is exact and takes less memory, so a tie keeps it), timed on the model
        with a batch of ``train.batch_tokens`` random tokens: native bf16 is not always faster (a Xeon with
        AVX512-BF16 and no AMX trained at 0.73x float32's speed, docs/default-model.md). Forward, loss and backward,
        alternating the two, the median of ``rounds`` each after one to warm up; no optimizer step, and the random
        state is put back, so that the run trains as it would have without the probe."""
        cfg, model = self.cfg, self.module
        saved = rng_state()
        width = 32
        rows = max(1, cfg.train.batch_tokens // width)
        tokens = torch.Generator().manual_seed(0)
        src, tgt = (
            torch.randint(4, cfg.model.vocab_size, (rows, width), generator=tokens).to(self.device) for _ in range(2)
        )
        seconds: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(rounds + 1):
            for bf16 in (False, True):
                started = time.perf_counter()
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                    logits = model(src, tgt)
                loss, _ = label_smoothed_nll(logits, tgt, cfg.train.label_smoothing, cfg.model.pad_id)
                loss.backward()
                model.zero_grad(set_to_none=True)
                if round_:
                    seconds[bf16].append(time.perf_counter() - started)
        set_rng_state(saved)
        fp32, bf16_s = (statistics.median(seconds[mode]) for mode in (False, True))
        log.info(
            "precision probe (%d tokens a step): float32 %.0f ms, bf16 autocast %.0f ms (%.2fx)",
            rows * width,
            fp32 * 1e3,
            bf16_s * 1e3,
            fp32 / bf16_s,
        )
        return fp32 >= BF16_MARGIN * bf16_s

    def state(self) -> dict[str, Any]:
        return {
            "config": self.cfg.to_dict(),
            "model": self.module.state_dict(),
            "vocab_files": checkpoint.read_vocab_files(self.cfg.data.vocab),
            "train_state": {
                "optimizer": self.optimizer.state_dict(),
                "scaler": self.scaler.state_dict(),
                "position": self.pos.__dict__,
                "rng": rng_state(),
                "amp": self.use_amp,
            },
        }

    def resume(self, path: Path) -> None:
        payload = checkpoint.load(path)
        self.module.load_state_dict(payload["model"])
        ts = payload.get("train_state")
        if ts is None:
            raise checkpoint.CheckpointError(f"{path} holds weights only (averaged?); cannot resume from it")
        self.optimizer.load_state_dict(ts["optimizer"])
        self.scaler.load_state_dict(ts["scaler"])
        self.pos = Position(**ts["position"])
        set_rng_state(ts["rng"])
        if "amp" in ts:  # checkpoints since 2026-11-26; older runs decide again
            self.amp_resumed = bool(ts["amp"])
        if not self.is_main:  # the checkpoint holds rank 0's random state; each other rank saved its own
            mine = self._rank_rng_path()
            own = torch.load(mine, weights_only=False) if mine.exists() else {}
            if self.pos.step in own:
                set_rng_state(own[self.pos.step])
            else:
                log.warning(
                    "rank %d: no random state of step %d in %s; dropout masks take a new draw",
                    self.rank,
                    self.pos.step,
                    mine,
                )
                torch.manual_seed(self.cfg.train.seed + self.rank + self.pos.step)
        budget = self.cfg.train.max_minutes
        log.info(
            "resumed from %s at step %d (epoch %d, batch %d) after %.1f minutes, toward the run's limit of %s; the "
            "limits count the whole run: raise train.max_minutes or train.max_steps to train longer",
            path,
            self.pos.step,
            self.pos.epoch,
            self.pos.batch_in_epoch,
            self.pos.elapsed / 60,
            f"{budget:g} minutes" if budget else f"{self.cfg.train.max_steps} steps",
        )

    def initialize(self, path: Path) -> None:
        """Start from ``path``'s weights: same architecture, same vocabulary; fresh optimizer and data order."""
        payload = checkpoint.load(path)
        theirs = Config.from_dict(payload["config"]).model
        ours = self.cfg.model
        ignored = {"dropout", "attention_dropout"}  # training-time only
        differ = [
            f"{f.name} {getattr(theirs, f.name)!r} (ours {getattr(ours, f.name)!r})"
            for f in dataclasses.fields(ours)
            if f.name not in ignored and getattr(theirs, f.name) != getattr(ours, f.name)
        ]
        if differ:
            raise checkpoint.CheckpointError(
                f"train.init={path}: its model differs from this run's [model]: {', '.join(differ)}"
            )
        if not checkpoint.same_vocabulary(payload["vocab_files"], checkpoint.read_vocab_files(self.cfg.data.vocab)):
            raise checkpoint.CheckpointError(
                f"train.init={path}: its vocabulary is not the one in data.vocab={self.cfg.data.vocab}; "
                "the token ids would mean different pieces"
            )
        self.module.load_state_dict(payload["model"])
        log.info("initialized from %s; schedule from step %d on", path, self.cfg.train.lr_offset)

    def _rank_rng_path(self) -> Path:
        return self.run_dir / f"rng-rank{self.rank}.pt"

    def save(self, best: bool = False) -> None:
        if self.world > 1:
            # Every rank saves at the same steps. The others keep their own random state (dropout) for a resume,
            # the last two steps' worth, written before rank 0's checkpoint: whichever checkpoint a kill leaves
            # as last.pt, its step is in every rank's file.
            if not self.is_main:
                path = self._rank_rng_path()
                states = torch.load(path, weights_only=False) if path.exists() else {}
                states = {step: st for step, st in states.items() if step < self.pos.step}
                states = dict(sorted(states.items())[-1:])
                states[self.pos.step] = rng_state()
                checkpoint.save(path, states)
            dist.barrier()
        if not self.is_main:
            return
        state = self.state()
        path = self.run_dir / f"checkpoint-{self.pos.step:07d}.pt"
        checkpoint.save(path, state)
        checkpoint.save(self.run_dir / "last.pt", state)
        if best:
            checkpoint.save(self.run_dir / "best.pt", state)
        kept = sorted(self.run_dir.glob("checkpoint-*.pt"))
        for old in kept[: -self.cfg.train.keep_last]:
            old.unlink()

    def lr(self, step: int) -> float:
        t = self.cfg.train
        rate = inverse_sqrt(step + t.lr_offset, self.cfg.model.d_model, t.warmup_steps, t.lr)
        # Adam's moments start from zero again: warm up to where the schedule stands, as a new run does.
        return rate * min(1.0, step / t.warmup_steps) if t.lr_offset else rate

    def step_batches(self):  # type: ignore[no-untyped-def]
        """Yield (epoch, batch index, index list) from the saved position on, until ``train.max_epochs`` (if set)
        is reached; ``self.epoch_done`` follows the fraction of passes over the data made so far."""
        t = self.cfg.train
        epoch, start = self.pos.epoch, self.pos.batch_in_epoch
        while True:
            batches = token_batches(self.train, t.batch_tokens, t.seed, epoch, multiple=self.cfg.data.pad_multiple)
            usable = len(batches) - len(batches) % self.world if self.world > 1 else len(batches)
            for b in range(start, usable, self.world):
                if t.max_epochs and epoch + b / usable >= t.max_epochs:
                    return
                self.epoch_done = epoch + (b + self.world) / usable
                yield epoch, b + self.world, batches[b + self.rank]
            epoch, start = epoch + 1, 0

    def fit(self) -> Position:
        cfg, t = self.cfg, self.cfg.train
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.is_main:
            (self.run_dir / "config.toml").write_text(dump_toml(cfg), encoding="utf-8")
        last = self.run_dir / "last.pt"
        if last.exists():
            self.resume(last)
        elif t.init:
            self.initialize(Path(t.init))
        self._choose_precision()
        log.info("model: %s parameters on %s", f"{count_parameters(self.module):,}", self.device)
        self._install_signal_handlers()
        self.model.train()
        batches = self.step_batches()
        started = time.monotonic() - self.pos.elapsed
        window_tokens, window_start, window_loss = 0, time.monotonic(), 0.0
        if t.max_minutes and self.pos.elapsed >= t.max_minutes * 60:
            log.info(
                "this run has used its time budget (train.max_minutes=%g, counted over the whole run) at step %d: "
                "nothing to do; to train on, raise it, e.g. --set train.max_minutes=%g",
                t.max_minutes,
                self.pos.step,
                t.max_minutes * 2,
            )
        # One bar, keyed to the limit that stops the run: the time budget when there is one, else the epochs when
        # they are set, else the steps.
        self.epoch_done = self.pos.epoch + 0.0
        unit = "minutes" if t.max_minutes else "epochs" if t.max_epochs else "steps"
        formats = {
            "minutes": "{l_bar}{bar}| {elapsed} of the time budget, {remaining} left{postfix}",
            "epochs": "{l_bar}{bar}| {n:.2f}/{total:g} epochs [{elapsed}<{remaining}{postfix}]",
            "steps": None,
        }
        bar = tqdm(
            total={"minutes": round(t.max_minutes * 60), "epochs": t.max_epochs, "steps": t.max_steps}[unit],
            initial={
                "minutes": min(round(self.pos.elapsed), round(t.max_minutes * 60)),
                "epochs": 0.0,  # set from the data position once the first batch is drawn
                "steps": self.pos.step,
            }[unit],
            disable=not self.is_main,
            unit={"minutes": "s", "epochs": "epoch", "steps": "step"}[unit],
            mininterval=10,
            dynamic_ncols=True,
            bar_format=formats[unit],
        )
        with logging_redirect_tqdm():  # log lines print above the bar, not over it
            self._loop(batches, started, bar, unit, window_tokens, window_start, window_loss)
        bar.close()
        self.board.close()
        if self.pos.step % t.save_every or self.budget_spent:
            self.save()
        if self.trace:
            self._trace({"step": self.pos.step, "weights_sha256": self.weights_checksum()})
        return self.pos

    def _loop(  # type: ignore[no-untyped-def]
        self,
        batches,
        started: float,
        bar: Any,
        unit: str,
        window_tokens: int,
        window_start: float,
        window_loss: float,
    ) -> None:
        cfg, t = self.cfg, self.cfg.train
        while self.pos.step < t.max_steps:
            out_of_time = bool(t.max_minutes) and time.monotonic() - started > t.max_minutes * 60
            stop, out_of_time = self._agree(self.stop_requested, out_of_time)  # one vote per step
            if stop:
                break
            if out_of_time:
                self.pos.elapsed = time.monotonic() - started  # saved: a resumed run knows its budget is spent
                self.budget_spent = True
                log.info(
                    "time budget of %.1f minutes reached at step %d; run the same command with a larger "
                    "train.max_minutes to go on from here",
                    t.max_minutes,
                    self.pos.step,
                )
                break
            lr = self.lr(self.pos.step + 1)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.zero_grad(set_to_none=True)
            step_tokens, step_loss = 0, 0.0
            micro = []
            taken = []  # (epoch, batch) this rank trains on in this step
            drawn = [next(batches, None) for _ in range(t.accumulate)]
            if drawn[-1] is None:  # train.max_epochs reached (every rank at the same batch)
                log.info("%g epochs done at step %d", t.max_epochs, self.pos.step)
                break
            for epoch, next_b, indices in drawn:  # type: ignore[misc]
                micro.append(collate(self.train, indices, cfg, self.device))
                self.pos.epoch, self.pos.batch_in_epoch = epoch, next_b
                taken.append((epoch, next_b - self.world + self.rank))
            n_tokens = sum(int((m[2] != cfg.model.pad_id).sum()) for m in micro)
            for src, tgt_in, tgt_out in micro:
                with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.use_amp):
                    logits = self.model(src, tgt_in)
                loss, nll = label_smoothed_nll(logits, tgt_out, t.label_smoothing, cfg.model.pad_id)
                self.scaler.scale(loss / n_tokens).backward()
                step_loss += float(nll.detach())
            step_tokens = n_tokens
            self.scaler.unscale_(self.optimizer)
            if t.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.pos.step += 1
            self.pos.elapsed = time.monotonic() - started
            window_tokens += step_tokens
            window_loss += step_loss
            if unit == "minutes":
                bar.update(min(round(self.pos.elapsed), bar.total) - bar.n)
            elif unit == "epochs":
                bar.update(min(self.epoch_done, bar.total) - bar.n)
            else:
                bar.update(1)
            record: dict[str, Any] = {"step": self.pos.step, "train_nll": step_loss / step_tokens}
            if self.pos.step % t.log_every == 0:
                rate = window_tokens / max(1e-9, time.monotonic() - window_start)
                log.info(
                    "step %d  epoch %d  nll %.3f  lr %.2e  %.0f tgt tok/s  %.1f min",
                    self.pos.step,
                    self.pos.epoch,
                    window_loss / window_tokens,
                    lr,
                    rate * self.world,
                    self.pos.elapsed / 60,
                )
                bar.set_postfix(step=self.pos.step, nll=f"{window_loss / window_tokens:.3f}", tok_s=f"{rate:.0f}")
                if self.is_main:
                    train_scalars = {"train/nll": window_loss / window_tokens, "train/lr": lr, "train/tok_s": rate}
                    self.board.scalars(self.pos.step, train_scalars)
                window_tokens, window_start, window_loss = 0, time.monotonic(), 0.0
            if self.trace:
                self._trace({"step": self.pos.step, "batches": taken})
            best = False
            if self.pos.step % t.eval_every == 0:
                (best,) = self._agree(self._evaluate(record))  # rank 0 evaluates; all save together
            self.pos.history.append(record)
            if self.pos.step % t.save_every == 0 or best:
                self.save(best)

    def _agree(self, *flags: bool) -> tuple[bool, ...]:
        """Each flag true on every rank when it is true on any, in one all-reduce: ranks stop (budget, signal) and
        save at the same step, or one would wait for the others' gradients forever."""
        if self.world == 1:
            return flags
        vote = torch.tensor([int(flag) for flag in flags], device=self.device)
        dist.all_reduce(vote, op=dist.ReduceOp.MAX)
        return tuple(bool(v) for v in vote.tolist())

    def _trace(self, record: dict[str, Any]) -> None:
        assert self.trace is not None
        with self.trace.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")

    def weights_checksum(self) -> str:
        digest = hashlib.sha256()
        for name, tensor in sorted(self.module.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    def _evaluate(self, record: dict[str, Any]) -> bool:
        if not self.is_main or not self.dev:
            return False
        scores = evaluate_dev(self.module, self.cfg, self.dev, self.dev_refs, self.tokenizer, self.device)
        record.update(scores, minutes=self.pos.elapsed / 60)
        log.info(
            "eval step %d: dev nll %.3f ppl %.2f BLEU %.2f chrF %.2f",
            self.pos.step,
            scores["dev_loss"],
            scores["dev_ppl"],
            scores["dev_bleu"],
            scores["dev_chrf"],
        )
        with (self.run_dir / "evals.jsonl").open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        self.board.scalars(self.pos.step, {f"dev/{k.removeprefix('dev_')}": float(v) for k, v in scores.items()})
        self.board.curve()
        if scores["dev_chrf"] > self.pos.best_chrf:
            self.pos.best_chrf = scores["dev_chrf"]
            return True
        return False

    def _install_signal_handlers(self) -> None:
        def request_stop(signum: int, _frame: object) -> None:
            log.info("signal %d: saving a checkpoint after this step, then stopping", signum)
            self.stop_requested = True

        try:
            signal.signal(signal.SIGTERM, request_stop)
            signal.signal(signal.SIGINT, request_stop)
        except ValueError:  # not the main thread (e.g. called from a test helper)
            pass


def train(cfg: Config, run_dir: str | Path) -> Position:
    trainer = Trainer(cfg, run_dir)
    trainer.load_data()
    trainer.build()
    return trainer.fit()
