"""What a GPU run's reports decide, read in seconds: the issue's targets, the opt-in cuts against the defaults, and
the run against an earlier one.

    python bench/gpu_session/decide.py RUN_DIR [--baseline docs/reports/gpu/h100-2026-11-27] [--out FILE]

RUN_DIR holds what ``device.sh targets`` leaves (``targets.json``, ``targets-base.md``, ``targets-load.json``;
copied to docs/reports/gpu/<machine>-<date>/). Printed, and written to FILE when given:

* **Targets** (issue #23, docs/inference-core.md's first table): batch 1 in ms a sentence, also scaled to 25 target
  pieces (the issue's sentence), against 8; batch 128 tok/s against 40,000; fp16 static steps against fp32 ones at
  batch 128 (1.3x, 90 % identical); the base preset at batch 32 against 11,000; the server at 64 and 128 clients
  against 450 sentences/s. Each with the system that made it.
* **Decisions** ("What the next GPU run decides"): each opt-in system against the default it would replace, in the
  same run: the two lanes (``...-lanes2``), the decoder-masked static step (``...-dmmha``), the masked step, and the
  servers with lanes and with static steps against the default server. "wins" means faster with at least 97 % of
  best outputs identical to cuda-fp32's where the report counts them; a server wins when it serves more at both
  64 and 128 clients.
* **Against the baseline**: every system and server both runs measured, new / old.

Missing files or systems are said, not guessed: a run cut short by its time limit still decides what it measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

PIECES = 25.0
"""The issue's batch-1 target is 8 ms a sentence of ~25 pieces."""
TARGETS = {"batch1_ms": 8.0, "batch128_tok_s": 40_000.0, "fp16_ratio": 1.3, "fp16_identical": 0.9}
BASE_TOK_S, SERVER_SENT_S, SAME = 11_000.0, 450.0, 0.97
FP32_STATIC, FP16_STATIC = "cuda-fp32-static", "cuda-fp16-static"
DEFAULT_STATIC = "cuda-fp16-fused-static"
CUTS = {
    "cuda-fp16-fused-static-lanes2": DEFAULT_STATIC,
    "cuda-fp16-fused-static-dmmha": DEFAULT_STATIC,
    "cuda-fp16w-fused-masked": "cuda-fp16w-fused",
}
"""An opt-in system of ``bench gpu`` and the default it would replace."""
DEFAULT_SERVER = "continuous"


def engine_rows(run: Path, name: str = "targets") -> list[dict[str, Any]]:
    """``bench gpu``'s rows from NAME.json, else from NAME.md's table (device.sh keeps only the .md of some)."""
    if (run / f"{name}.json").is_file():
        rows = json.loads((run / f"{name}.json").read_text(encoding="utf-8"))["rows"]
        return [
            {
                "batch": int(r["batch"]),
                "system": r["system"],
                "tok_s": float(r["tokens_per_s"]),
                "sent_s": float(r["sentences_per_s"]),
                "identical": r.get("identical_to_cuda_fp32"),
            }
            for r in rows
        ]
    if not (run / f"{name}.md").is_file():
        return []
    out = []
    for cells in _table(run / f"{name}.md", "system"):
        identical = cells.get("identical to cuda-fp32", "").rstrip("%").strip()
        out.append(
            {
                "batch": int(cells["batch"]),
                "system": cells["system"],
                "tok_s": float(cells["target tok/s"].replace(",", "")),
                "sent_s": float(cells["sentences/s"].replace(",", "")),
                "identical": float(identical) / 100 if identical else None,
            }
        )
    return out


def _table(path: Path, column: str) -> list[dict[str, str]]:
    """The rows of the first markdown table in ``path`` that has ``column``, as header -> cell."""
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            if rows:
                break
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells if column in cells else None
        elif not set(cells[0]) <= set("-: "):
            rows.append(dict(zip(header, cells, strict=False)))
    return rows


def server_rows(run: Path) -> tuple[dict[str, dict[int, float]], dict[str, float]]:
    """``bench load``'s sentences/s by server and clients, and each server's seconds to ready."""
    path = run / "targets-load.json"
    if not path.is_file():
        return {}, {}
    report = json.loads(path.read_text(encoding="utf-8"))
    served = {
        server: {int(level["clients"]): float(level["sentences_per_s"]) for level in levels}
        for server, levels in report.get("results", {}).items()
    }
    return served, {k: float(v) for k, v in report.get("setup", {}).get("ready_s", {}).items()}


def _find(rows: list[dict[str, Any]], batch: int, system: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["batch"] == batch and r["system"] == system), None)


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def targets(rows: list[dict[str, Any]], base: list[dict[str, Any]], served: dict[str, dict[int, float]]) -> list[str]:
    lines = ["## Targets", "", "| target | this run | system | |", "|---|---|---|---|"]
    cuda = [r for r in rows if r["system"].startswith("cuda")]
    one = [r for r in cuda if r["batch"] == 1]
    if one:
        best = max(one, key=lambda r: r["sent_s"])
        ms, pieces = 1000.0 / best["sent_s"], best["tok_s"] / best["sent_s"]
        scaled = ms * PIECES / pieces
        ok = scaled <= TARGETS["batch1_ms"]
        lines.append(
            f"| batch 1 <= {TARGETS['batch1_ms']:g} ms a sentence of ~25 pieces | {ms:.2f} ms a sentence of "
            f"{pieces:.1f} pieces, {scaled:.2f} scaled to 25 | {best['system']} | {_met(ok)} |"
        )
    else:
        lines.append("| batch 1 | missing | | |")
    large = [r for r in cuda if r["batch"] == 128]
    if large:
        best = max(large, key=lambda r: r["tok_s"])
        ok = best["tok_s"] >= TARGETS["batch128_tok_s"]
        lines.append(f"| batch 128 >= 40,000 tok/s | {best['tok_s']:,.0f} | {best['system']} | {_met(ok)} |")
    else:
        lines.append("| batch 128 | missing | | |")
    fp16, fp32 = _find(rows, 128, FP16_STATIC), _find(rows, 128, FP32_STATIC)
    if fp16 and fp32:
        ratio, same = fp16["tok_s"] / fp32["tok_s"], fp16["identical"]
        ok = ratio >= TARGETS["fp16_ratio"] and same is not None and same >= TARGETS["fp16_identical"]
        shown = "?" if same is None else f"{same:.0%}"
        lines.append(
            f"| fp16 >= 1.3x fp32 at batch 128, >= 90 % identical | {ratio:.2f}x, {shown} identical | "
            f"{FP16_STATIC} / {FP32_STATIC} | {_met(ok)} |"
        )
    else:
        lines.append(f"| fp16 against fp32 | missing ({FP16_STATIC} or {FP32_STATIC} at batch 128) | | |")
    base32 = [r for r in base if r["batch"] == 32 and r["system"].startswith("cuda")]
    if base32:
        best = max(base32, key=lambda r: r["tok_s"])
        ok = best["tok_s"] >= BASE_TOK_S
        lines.append(
            f"| base preset, batch 32 >= 11,000 tok/s | {best['tok_s']:,.0f} | {best['system']} | {_met(ok)} |"
        )
    else:
        lines.append("| base preset, batch 32 | missing | | |")
    server = served.get(DEFAULT_SERVER, {})
    if 64 in server and 128 in server:
        ok = min(server[64], server[128]) >= SERVER_SENT_S
        lines.append(
            f"| server >= 450 sentences/s at 64 / 128 clients | {server[64]:.1f} / {server[128]:.1f} | "
            f"{DEFAULT_SERVER} | {_met(ok)} |"
        )
    else:
        lines.append("| server at 64 / 128 clients | missing | | |")
    return lines


def decisions(rows: list[dict[str, Any]], served: dict[str, dict[int, float]], ready: dict[str, float]) -> list[str]:
    lines = ["## Decisions", "", "| cut | against | batch or clients | ratio | identical | verdict |"]
    lines.append("|---|---|---:|---:|---:|---|")
    for cut, default in CUTS.items():
        for batch in sorted({r["batch"] for r in rows}):
            new, old = _find(rows, batch, cut), _find(rows, batch, default)
            if not new or not old:
                if new or old:
                    lines.append(f"| {cut} | {default} | {batch} | missing | | |")
                continue
            ratio, same = new["tok_s"] / old["tok_s"], new["identical"]
            wins = ratio > 1.0 and (same is None or same >= SAME)
            shown = "?" if same is None else f"{same:.0%}"
            lines.append(
                f"| {cut} | {default} | {batch} | {ratio:.2f}x | {shown} | {'wins' if wins else 'does not win'} |"
            )
    base = served.get(DEFAULT_SERVER)
    for server, levels in served.items():
        if server == DEFAULT_SERVER or not base:
            continue
        ratios = {c: levels[c] / base[c] for c in (64, 128) if c in levels and c in base}
        for clients, ratio in sorted(ratios.items()):
            lines.append(f"| server {server} | {DEFAULT_SERVER} | {clients} clients | {ratio:.2f}x | | |")
        wins = len(ratios) == 2 and min(ratios.values()) > 1.0
        lines.append(f"| server {server} | {DEFAULT_SERVER} | both | | | {'wins' if wins else 'does not win'} |")
    if ready:
        lines += ["", "Seconds to ready: " + ", ".join(f"{k} {v:.1f}" for k, v in ready.items()) + "."]
    return lines


def against(
    rows: list[dict[str, Any]],
    old_rows: list[dict[str, Any]],
    served: dict[str, dict[int, float]],
    old_served: dict[str, dict[int, float]],
    baseline: Path,
) -> list[str]:
    lines = [f"## Against {baseline}", "", "| system or server | batch or clients | new | old | new / old |"]
    lines.append("|---|---:|---:|---:|---:|")
    for r in rows:
        old = _find(old_rows, r["batch"], r["system"])
        if old:
            lines.append(
                f"| {r['system']} | {r['batch']} | {r['tok_s']:,.0f} tok/s | {old['tok_s']:,.0f} tok/s | "
                f"{r['tok_s'] / old['tok_s']:.2f}x |"
            )
    for server, levels in served.items():
        for clients, sent in sorted(levels.items()):
            before = old_served.get(server, {}).get(clients)
            if before:
                lines.append(
                    f"| {server} | {clients} | {sent:.1f} sent/s | {before:.1f} sent/s | {sent / before:.2f}x |"
                )
    return lines


def report(run: Path, baseline: Path | None = None) -> str:
    rows, base = engine_rows(run), engine_rows(run, "targets-base")
    served, ready = server_rows(run)
    lines = [f"# What {run} decides", ""]
    if not rows and not served:
        lines.append(f"No targets.json / targets.md nor targets-load.json in {run}: nothing measured to decide on.")
    lines += targets(rows, base, served) + [""] + decisions(rows, served, ready)
    if baseline is not None:
        old_served, _ = server_rows(baseline)
        lines += [""] + against(rows, engine_rows(baseline), served, old_served, baseline)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a GPU run's reports (device.sh targets)")
    parser.add_argument("--baseline", type=Path, help="an earlier run's reports, e.g. docs/reports/gpu/h100-2026-11-27")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    text = report(args.run, args.baseline)
    print(text, end="")
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
