"""Our engine against CTranslate2 and Hugging Face transformers on the same weights, side by side in one run.

    python -m bench peers --checkpoint CKPT [--bundle BUNDLE] [--input data/en-de/test.tsv] [--sentences 64]
                          [--batch-sizes 1,8,32] [--beams 1,4] [--threads 2] [--repeats 3] [--max-length 96]
                          [--work cache/peers] [--out docs/reports/peers/report]

From one checkpoint (post-LN: the Marian format has no pre-LN variant) it prepares, under ``--work``:
our fp32 bundle (or ``--bundle``) and an int8 one (``python -m training export``), the Hugging Face Marian
directory (``export-marian``), and its CTranslate2 conversion (the converter behind
``ct2-transformers-converter``, with the start-token fix of docs/interop.md so CTranslate2 decodes the same
model). Each system then runs in its own process (so peak RSS is its own) with the same threads, the same
sentences in the same batches, the same beam size and the same length cap (``--max-length`` pieces, EOS
included; no relative cap). Configurations are measured alternately (A B C ... A B C ...) and the median of
``--repeats`` runs is reported. Target tokens are the best hypothesis' pieces without EOS, counted on each
system's own output. Writes OUT.md, OUT.json and OUT.png.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.loadtools import ROOT, report_dir, report_path, write_report

SYSTEMS = ["ours-fp32", "ours-int8", "ct2-float32", "ct2-int8", "transformers"]
OPTIONAL = [
    "ours-fp32-own-pools",
    "ours-fp32-decoder-spin",
    "ours-fp32-spin",
    "ours-int8-spin",
    "ours-int8c",
    "ours-fp32-static",
    "ours-fp32-shortlist",
    "ours-fp32-own-pools-shortlist",
    "ours-fp32-decoder-spin-shortlist",
    "ct2-float32-vmap",
]
"""Optional (``--systems``): our engine with a thread pool per session (``-own-pools``, the library's and the
server's default; every other ``ours`` system shares one pool, as ``MT_SHARED_POOL=1`` makes the server do:
inference/threads.py), the same with the pools' idle threads spinning (``-spin``) or only the decoder step's pool
spinning (``-decoder-spin``, ``Engine.load(spinning="decoder")``), our int8 export with one weight
scale per output column (``--quantize int8-channel``, the default model's), and our fp32 graphs with static-shape
steps (``Engine.load(static_step=True)``, what replays as CUDA graphs on a GPU). ``-shortlist``: the same fp32
bundle with a vocabulary shortlist (``python -m training shortlist``, built from ``--shortlist-data``) decoded with
``Engine.load(shortlist=True)``; ``ct2-float32-vmap``: CTranslate2 float32 with its own dynamic vocabulary reduction
(``use_vmap``) from a ``vmap.txt`` written from the same table, so that both sides score the same candidates."""
REFERENCE = "ct2-float32"


# ----------------------------------------------------------------------------------------------- workers
class Worker:
    """Runs inside its own process: loads one system, then answers one JSON request per stdin line."""

    def __init__(self, system: str, work: Path, threads: int):
        self.system = system
        self.work = work
        data = json.loads((work / "sources.json").read_text(encoding="utf-8"))
        self.ids: list[list[int]] = data["ids"]
        self.pieces: list[list[str]] = data["pieces"]
        from core.tokenizer import Tokenizer

        fp32 = Path((work / "bundle-fp32.txt").read_text(encoding="utf-8"))
        self.tokenizer = Tokenizer(fp32)
        if system.startswith("ours"):
            from inference.engine import Engine

            bundles = {
                "ours-fp32": fp32,
                "ours-int8": work / "bundle-int8",
                "ours-int8c": work / "bundle-int8c",
                "ours-fp32-static": work / "bundle-static",
            }
            shortlist = system.endswith("-shortlist")
            kind = system.removesuffix("-shortlist")
            bundle = bundles[kind.removesuffix("-spin").removesuffix("-decoder").removesuffix("-own-pools")]
            if shortlist:
                bundle = work / "bundle-shortlist"
            spinning: bool | str = "decoder" if kind.endswith("-decoder-spin") else kind.endswith("-spin")
            static = kind.endswith("-static")
            shared = not (spinning or kind.endswith("-own-pools"))
            self.engine = Engine.load(
                bundle,
                provider="cpu",
                threads=threads,
                spinning=spinning,
                shared_pool=shared,
                static_step=static,
                shortlist=shortlist,
            )
            self.engine.warmup()
        elif system.startswith("ct2"):
            import ctranslate2

            compute = "int8" if system == "ct2-int8" else "float32"
            self.use_vmap = system.endswith("-vmap")
            self.translator = ctranslate2.Translator(
                str(work / ("ct2-vmap" if self.use_vmap else "ct2")),
                device="cpu",
                compute_type=compute,
                intra_threads=threads,
                inter_threads=1,
            )
            self.bos_piece = self.tokenizer.pieces[self.tokenizer.specials.bos_id]
            self.eos_piece = self.tokenizer.pieces[self.tokenizer.specials.eos_id]
            # With --no-eos the weights bar EOS, but CTranslate2 4.8.5 under use_vmap ends most batch-1 sentences
            # after a few pieces all the same (the barring bias not applied there): bar it in the search too.
            self.suppressed = [[self.bos_piece]] + ([[self.eos_piece]] if data.get("no_eos") else [])
        elif system == "transformers":
            import torch
            from transformers import MarianMTModel

            torch.set_num_threads(threads)
            self.torch = torch
            self.model = MarianMTModel.from_pretrained(str(work / "marian")).eval()
            marian_vocab = json.loads((work / "marian" / "vocab.json").read_text(encoding="utf-8"))
            self.to_marian = {i: marian_vocab[p] for i, p in enumerate(self.tokenizer.pieces)}
            self.from_marian = {v: k for k, v in self.to_marian.items()}
            self.marian_pad = self.model.config.pad_token_id
            self.marian_eos = self.model.config.eos_token_id
        else:
            raise SystemExit(f"unknown system {system}")

    def run(self, beam: int, batch: int, max_length: int) -> tuple[float, list[list[str]]]:
        """Seconds for translating every sentence (ids in, pieces out), and the output pieces."""
        outputs: list[list[str]] = []
        started = time.perf_counter()
        for start in range(0, len(self.ids), batch):
            outputs += self._batch(start, start + batch, beam, max_length)
        return time.perf_counter() - started, outputs

    def _batch(self, lo: int, hi: int, beam: int, max_length: int) -> list[list[str]]:
        tok = self.tokenizer
        if self.system.startswith("ours"):
            from core.translation import DecodeOptions

            options = DecodeOptions(beam_size=beam, max_length=max_length, max_length_ratio=1e6)
            return [t.best.pieces for t in self.engine.translate_ids(self.ids[lo:hi], options)]
        if self.system.startswith("ct2"):
            results = self.translator.translate_batch(
                [p + [self.eos_piece] for p in self.pieces[lo:hi]],
                beam_size=beam,
                max_decoding_length=max_length,
                length_penalty=1.0,
                suppress_sequences=self.suppressed,
                max_batch_size=0,
                use_vmap=self.use_vmap,
            )
            return [[p for p in r.hypotheses[0] if p != self.eos_piece] for r in results]
        torch = self.torch
        rows = [[self.to_marian[i] for i in ids] + [self.marian_eos] for ids in self.ids[lo:hi]]
        width = max(map(len, rows))
        input_ids = torch.full((len(rows), width), self.marian_pad, dtype=torch.long)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = torch.tensor(row)
        with torch.inference_mode():
            generated = self.model.generate(
                input_ids=input_ids,
                attention_mask=(input_ids != self.marian_pad).long(),
                num_beams=beam,
                do_sample=False,
                max_new_tokens=max_length,
                length_penalty=1.0,
                early_stopping=True,
            )
        special = {tok.specials.pad_id, tok.specials.bos_id, tok.specials.eos_id}
        out = []
        for row in generated.tolist():
            ours = [self.from_marian[i] for i in row]
            out.append([tok.pieces[i] for i in ours if i not in special])
        return out


def paired_ratios(row: dict[str, Any], ours: str, peer: str) -> list[float]:
    """Our tokens/s over the peer's, once per repeat (same repeat = adjacent in time)."""
    a, b = row["systems"][ours], row["systems"][peer]
    tokens_a = a["tokens_per_s"] * statistics.median(a["seconds"])
    tokens_b = b["tokens_per_s"] * statistics.median(b["seconds"])
    return [(tokens_a / ta) / (tokens_b / tb) for ta, tb in zip(a["seconds"], b["seconds"], strict=True)]


def worker_main(system: str, work: Path, threads: int) -> None:
    worker = Worker(system, work, threads)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        seconds, outputs = worker.run(request["beam"], request["batch"], request["max_length"])
        # VmHWM, not getrusage's ru_maxrss: that one keeps the parent's peak across fork + exec.
        status = Path("/proc/self/status").read_text().splitlines()
        rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        print(json.dumps({"seconds": seconds, "outputs": outputs, "peak_rss_kb": rss_kb}), flush=True)


class WorkerProcess:
    def __init__(self, system: str, work: Path, threads: int):
        self.system = system
        cmd = [
            sys.executable,
            "-m",
            "bench",
            "peers",
            "--worker",
            system,
            "--work",
            str(work),
            "--threads",
            str(threads),
        ]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.system} worker died (exit {self.proc.wait()}); see its output above")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, beam: int, batch: int, max_length: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"beam": beam, "batch": batch, "max_length": max_length}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


# ------------------------------------------------------------------------------------------- preparation
def fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def without_eos(checkpoint: Path, work: Path) -> Path:
    """A copy of ``checkpoint`` whose final logits bias makes EOS (almost) impossible, so that every system
    decodes every sentence to the length cap: a fixed-length throughput test, whatever the weights' quality
    (an under-trained checkpoint otherwise stops after a few tokens and measures per-call overhead only)."""
    import torch

    out = work / f"no-eos-{fingerprint(checkpoint)}.pt"
    if not out.exists():
        payload = torch.load(checkpoint, map_location="cpu", weights_only=False)
        payload.pop("train_state", None)
        config = payload["config"]
        config["model"]["final_logits_bias"] = True
        bias = torch.zeros(config["model"]["vocab_size"])
        bias[config["model"]["eos_id"]] = -1e4  # exp(-1e4) is 0 in float32: EOS never wins a beam slot
        payload["model"]["final_logits_bias"] = bias
        work.mkdir(parents=True, exist_ok=True)
        torch.save(payload, out)
    return out


def convert_ct2(marian_dir: Path, out: Path) -> None:
    """The conversion ct2-transformers-converter runs, starting the decoder from our BOS (docs/interop.md)."""
    from ctranslate2.converters import TransformersConverter
    from ctranslate2.converters import transformers as ct2t

    class StartFromBos(ct2t.MarianMTLoader):  # type: ignore[misc, name-defined]
        def set_decoder(self, spec: Any, decoder: Any) -> None:
            ct2t.BartLoader.set_decoder(self, spec, decoder)

        def set_config(self, config: Any, model: Any, tokenizer: Any) -> None:
            super().set_config(config, model, tokenizer)
            config.decoder_start_token = tokenizer.convert_ids_to_tokens(model.config.decoder_start_token_id)

    saved = ct2t._MODEL_LOADERS["MarianConfig"]
    ct2t._MODEL_LOADERS["MarianConfig"] = StartFromBos()
    try:
        TransformersConverter(str(marian_dir)).convert(str(out), force=True)
    finally:
        ct2t._MODEL_LOADERS["MarianConfig"] = saved


EXPORT_CODE = ("training/export", "training/incremental.py", "training/interop")


def write_vmap(bundle: Path, out: Path) -> int:
    """CTranslate2's vocabulary map (``src_piece<TAB>candidates``, an empty source for the pieces always allowed) from
    ``bundle``'s shortlist table: the same lists our engine builds (frequent pieces, each source piece's candidates
    and, when the table copies them, the piece itself). Returns the number of lines."""
    from core.bundle import read_manifest
    from core.tokenizer import Tokenizer
    from inference.shortlist import Shortlist

    pieces = Tokenizer(bundle).pieces
    table = Shortlist.load(bundle, read_manifest(bundle))
    lines = ["\t" + " ".join(pieces[i] for i in table.frequent)]
    for source, row in enumerate(table.candidates):
        listed = [int(i) for i in row if i >= 0] + ([source] if table.copy_source else [])
        if listed:
            lines.append(pieces[source] + "\t" + " ".join(pieces[i] for i in listed))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def prepare(
    checkpoint: Path,
    bundle: Path | None,
    work: Path,
    systems: list[str] | None = None,
    shortlist_data: Path | None = None,
    shortlist_limit: int = 0,
) -> Path:
    """Every format of ``checkpoint`` under work/<fingerprint>-<export code>/, built once and reused: the
    directory changes with the checkpoint and with the code that exports it, so a graph change is measured."""
    from training.export import export_bundle
    from training.interop.marian import export_marian

    files = [
        f
        for name in EXPORT_CODE
        for f in ([ROOT / name] if name.endswith(".py") else sorted((ROOT / name).glob("*.py")))
    ]
    code = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:8]
    target = work / f"{fingerprint(checkpoint)}-{code}"
    target.mkdir(parents=True, exist_ok=True)
    fp32 = bundle.resolve() if bundle is not None else target / "bundle-fp32"
    if not fp32.exists():
        print("exporting the fp32 bundle ...", flush=True)
        export_bundle(checkpoint, fp32)
    (target / "bundle-fp32.txt").write_text(str(fp32), encoding="utf-8")
    if not (target / "bundle-int8").exists():
        print("exporting the int8 bundle ...", flush=True)
        export_bundle(checkpoint, target / "bundle-int8", quantize="int8", tolerance=5.0)
    if not (target / "bundle-int8c").exists():
        print("exporting the int8-channel bundle ...", flush=True)
        export_bundle(checkpoint, target / "bundle-int8c", quantize="int8-channel", tolerance=5.0)
    if "ours-fp32-static" in (systems or []) and not (target / "bundle-static").exists():
        print("exporting the fp32 bundle with the static-shape graphs ...", flush=True)
        export_bundle(checkpoint, target / "bundle-static", gpu_dtype="fp32", static_step=True)
    if any(s.endswith(("-shortlist", "-vmap")) for s in systems or []) and not (target / "bundle-shortlist").exists():
        from training.export.shortlist import add_to_bundle

        if shortlist_data is None:
            raise SystemExit("the -shortlist and -vmap systems need --shortlist-data (the training TSV)")
        print(f"adding a shortlist built from {shortlist_data} to a copy of the fp32 bundle ...", flush=True)
        shutil.copytree(fp32, target / "bundle-shortlist.tmp", dirs_exist_ok=True)
        add_to_bundle(target / "bundle-shortlist.tmp", [shortlist_data], 100, 600, limit=shortlist_limit)
        (target / "bundle-shortlist.tmp").rename(target / "bundle-shortlist")
    if not (target / "marian").exists():
        print("exporting the Marian directory ...", flush=True)
        export_marian(checkpoint, target / "marian")
    if not (target / "ct2" / "model.bin").exists():
        print("converting to CTranslate2 ...", flush=True)
        convert_ct2(target / "marian", target / "ct2")
    if "ct2-float32-vmap" in (systems or []) and not (target / "ct2-vmap" / "vmap.txt").exists():
        shutil.copytree(target / "ct2", target / "ct2-vmap", dirs_exist_ok=True)
        write_vmap(target / "bundle-shortlist", target / "ct2-vmap" / "vmap.txt")
    return target


# ------------------------------------------------------------------------------------------------- report
def plot(rows: list[dict[str, Any]], systems: list[str], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    configs = [(r["beam"], r["batch"]) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / len(systems)
    for j, system in enumerate(systems):
        values = [r["systems"][system]["tokens_per_s"] for r in rows]
        ax.bar([i + j * width for i in range(len(rows))], values, width, label=system)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
    ax.set_xticklabels([f"beam {b}\nbatch {n}" for b, n in configs])
    ax.set_ylabel("target tokens/s")
    ax.set_title("Same weights, same sentences, 2 CPU threads each")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--checkpoint", help="post-LN checkpoint (python -m training train / average)")
    parser.add_argument("--bundle", help="use this fp32 bundle (exported from --checkpoint) instead of exporting")
    parser.add_argument("--input", default=str(ROOT / "data" / "en-de" / "test.tsv"), help="TSV, first column")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=96, help="length cap in pieces, EOS included")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--work", default=str(ROOT / "cache" / "peers"))
    parser.add_argument("--out", default=str(report_dir("peers") / "report"))
    parser.add_argument(
        "--no-eos",
        action="store_true",
        help="bar EOS through the final logits bias: every sentence decodes to --max-length pieces (see without_eos)",
    )
    parser.add_argument(
        "--shortlist-data",
        default=str(ROOT / "data" / "en-de-next" / "train.tsv"),
        help="training TSV the -shortlist / -vmap systems' table is built from (python -m training shortlist)",
    )
    parser.add_argument("--shortlist-limit", type=int, default=100_000, help="its first N pairs (0: all)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker, Path(args.work), args.threads)
        return 0
    if not args.checkpoint:
        parser.error("--checkpoint is required")
    systems = args.systems.split(",")
    unknown = set(systems) - set(SYSTEMS + OPTIONAL)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {SYSTEMS + OPTIONAL}")
    checkpoint = without_eos(Path(args.checkpoint), Path(args.work)) if args.no_eos else Path(args.checkpoint)
    work = prepare(
        checkpoint,
        Path(args.bundle) if args.bundle else None,
        Path(args.work),
        systems,
        Path(args.shortlist_data),
        args.shortlist_limit,
    )

    from core.tokenizer import Tokenizer

    fp32 = Path((work / "bundle-fp32.txt").read_text(encoding="utf-8"))
    tok = Tokenizer(fp32)
    lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    texts = [line.split("\t")[0] for line in lines if line.strip()][: args.sentences]
    pieces = [p for p in map(tok.source_pieces, texts) if p]
    (work / "sources.json").write_text(
        json.dumps({"ids": [tok.to_ids(p) for p in pieces], "pieces": pieces, "no_eos": args.no_eos}),
        encoding="utf-8",
    )
    print(f"starting {len(systems)} workers ...", flush=True)
    workers = {s: WorkerProcess(s, work, args.threads) for s in systems}
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    beams = [int(b) for b in args.beams.split(",")]
    rows: list[dict[str, Any]] = []
    try:
        for beam in beams:
            for batch in batch_sizes:
                times: dict[str, list[float]] = {s: [] for s in systems}
                outputs: dict[str, list[list[str]]] = {}
                rss: dict[str, int] = {}
                for _ in range(args.repeats):
                    for s in systems:  # alternate: A B C ... A B C ...
                        reply = workers[s].run(beam, batch, args.max_length)
                        times[s].append(reply["seconds"])
                        outputs[s] = reply["outputs"]
                        rss[s] = reply["peak_rss_kb"]
                ref = outputs.get(REFERENCE)
                row: dict[str, Any] = {"beam": beam, "batch": batch, "sentences": len(pieces), "systems": {}}
                for s in systems:
                    seconds = statistics.median(times[s])
                    tokens = sum(len(o) for o in outputs[s])
                    row["systems"][s] = {
                        "seconds": times[s],
                        "tokens_per_s": tokens / seconds,
                        "sentences_per_s": len(pieces) / seconds,
                        "peak_rss_mb": rss[s] / 1024,
                        "identical_to_ct2": (
                            sum(a == b for a, b in zip(outputs[s], ref, strict=True)) / len(ref) if ref else None
                        ),
                    }
                rows.append(row)
                print(
                    f"beam {beam} batch {batch:>2}: "
                    + ", ".join(f"{s} {row['systems'][s]['tokens_per_s']:.0f}" for s in systems)
                    + " tok/s",
                    flush=True,
                )
    finally:
        for w in workers.values():
            w.close()

    import ctranslate2
    import onnxruntime
    import torch
    import transformers

    manifest = json.loads((fp32 / "manifest.json").read_text(encoding="utf-8"))
    arch = manifest["architecture"]
    setup = {
        "model": f"d{arch['d_model']} {arch['encoder_layers']}+{arch['decoder_layers']} layers, ff {arch['d_ff']}, "
        f"vocab {arch['vocab_size']}"
        + (", EOS barred (--no-eos: every sentence decodes to the cap)" if args.no_eos else ""),
        "checkpoint": args.checkpoint,
        "input": args.input,
        "sentences": len(pieces),
        "threads": args.threads,
        "repeats": args.repeats,
        "max_length": args.max_length,
        "versions": {
            "onnxruntime": onnxruntime.__version__,
            "ctranslate2": ctranslate2.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        },
        "cpu": platform.processor() or platform.machine(),
        "date": time.strftime("%Y-%m-%d"),
    }
    ours = [s for s in systems if s.startswith("ours")]
    peers = [s for s in systems if not s.startswith("ours")]
    header = "| beam | batch | system | tok/s | sent/s | peak RSS MB | identical to ct2-float32 |"
    table = [header, "|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        for s in systems:
            v = r["systems"][s]
            same = "" if v["identical_to_ct2"] is None else f"{100 * v['identical_to_ct2']:.0f} %"
            table.append(
                f"| {r['beam']} | {r['batch']} | {s} | {v['tokens_per_s']:.0f} | {v['sentences_per_s']:.1f} "
                f"| {v['peak_rss_mb']:.0f} | {same} |"
            )
    ratios = ["| beam | batch | " + " | ".join(f"{o} / {p}" for o in ours for p in peers) + " |"]
    ratios.append("|---:|---:|" + "---:|" * (len(ours) * len(peers)))
    for r in rows:
        cells = []
        for o in ours:
            for p in peers:
                pairs = paired_ratios(r, o, p)
                r.setdefault("ratios", {})[f"{o}/{p}"] = pairs
                cells.append(f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})")
        ratios.append(f"| {r['beam']} | {r['batch']} | " + " | ".join(cells) + " |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    has_plot = plot(rows, systems, report_path(out, ".png"))
    versions = ", ".join(f"{k} {v}" for k, v in setup["versions"].items())
    markdown = "\n".join(
        [
            "# Our engine vs CTranslate2 and transformers, same weights",
            "",
            f"Generated by `python -m bench peers` on {setup['date']}: {setup['model']}, {setup['sentences']} "
            f"sentences of {setup['input']}, {setup['threads']} threads each, length cap {setup['max_length']} pieces, "
            f"median of {setup['repeats']} alternated runs; {versions}. Our systems share one onnxruntime thread "
            "pool per process (as the server with MT_SHARED_POOL=1), except `-own-pools` and `-spin` (a pool per "
            "session).",
            "",
            "Throughput (target tokens/s, the best hypothesis' pieces without EOS):",
            "",
            *table,
            "",
            "Our throughput as a ratio to each peer's: the median over the repeats of the ratio within a repeat "
            "(the two runs of a pair are minutes apart at most, so drift of the machine cancels better than in a "
            "ratio of medians), and in brackets the lowest and highest of those per-repeat ratios:",
            "",
            *ratios,
            "",
            *([f"![throughput]({report_path(out, '.png').name})", ""] if has_plot else []),
        ]
    )
    print()
    print(markdown)
    write_report(out, markdown, {"setup": setup, "results": rows})
    print(f"wrote {report_path(out, '.md')}, {report_path(out, '.json')}" + (", and the plot" if has_plot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
