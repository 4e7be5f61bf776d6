"""The host's own time in a static-shape step (``StaticState.step`` less its graph run), per step.

    PYTHONPATH=TREE python bench/gpu_session/static_host.py BUNDLE INPUT BATCH [--provider cpu|cuda] [--arrays-from N]
                                                            [--lean | --full] [--copy-windows] [--server-options]

Decodes sentences of INPUT (beam 4) in batches of BATCH with static-shape steps, four passes after one to warm up,
timing each ``StaticState.step`` and the graph run inside it: what is left is the numpy and Python around the
replay, which at batch 1 on a GPU waits between two replays; and per sentence, its admission (the static encoder's
run on CUDA, then ``place``) and the graphs run through ``Engine.run_graph`` (``place``, ``grow``, ``compact``, and
the encoder where it is not captured). Also the beam search's own time a step in the engine (``BeamSearch.step``
less the step it drives): ``--arrays-from`` sets the set size from which it keeps its hypotheses in arrays
(inference/beam_search.py ARRAYS_FROM; 1: always, 1000000000: never), so two runs compare its two forms.
``--lean`` / ``--full``: the lean static step (core/graphs.py ``STATIC_LEAN``) or the full one for the steps nobody
asks attention rows for; neither: the engine's default (lean on CUDA only). ``--copy-windows``: a decoder-masked
static step's windows (core/graphs.py ``WINDOW``) left unbound, so that its kernel copies each into the present, as
before session 46. ``--server-options``: decode as the server does by default (its n-gram guard and length penalty,
core/translation.py) instead of plain beam 4. Each pass also counts the steps by the top-k the graph ran (``graph k``:
the bucket of the ``k`` the search asked for; a guard that widened it past 8 ran another captured graph, session 48).
PYTHONPATH picks the code tree measured (run it once with an older worktree for a side-by-side figure). Figures in
docs/inference-core.md, sessions 26 and 27.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from core.translation import DEFAULT_LENGTH_PENALTY, DEFAULT_NO_REPEAT_NGRAM_SIZE, DecodeOptions
from inference import beam_search, static_state
from inference.engine import Engine

PHASES = ("32+", "8-31", "2-7", "1")


def _phase(sentences: int) -> str:
    return "32+" if sentences >= 32 else "8-31" if sentences >= 8 else "2-7" if sentences >= 2 else "1"


def main(argv: list[str]) -> None:
    bundle, path, batch = argv[0], argv[1], int(argv[2])
    provider = argv[argv.index("--provider") + 1] if "--provider" in argv else "cpu"
    if "--arrays-from" in argv:
        beam_search.ARRAYS_FROM = beam_search.GUARDED_ARRAYS_FROM = int(argv[argv.index("--arrays-from") + 1])
    lean = True if "--lean" in argv else False if "--full" in argv else None  # None: lean on CUDA (STATIC_LEAN)
    engine = Engine.load(bundle, provider=provider, threads=2, static_step=True, lean_step=lean)
    if "--copy-windows" in argv:  # a decoder-masked step's windows left unbound: its kernel copies them (WINDOW)
        engine.static_windows = []
    with open(path, encoding="utf-8") as lines:
        texts = [line.split("\t")[0] for line in lines if line.strip()][: max(40, 2 * batch)]
    totals: dict[str, float] = {}

    def timed(key: str, call: Any) -> Any:
        """``call``, its seconds added to ``totals[key]`` and its calls counted in ``totals[key + "s"]``."""

        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            out = call(*args, **kwargs)
            totals[key] += time.perf_counter() - started
            totals[key + "s"] += 1
            return out

        return run

    phases: dict[str, list[float]] = {}  # a search step's seconds (its graph run included) by the set's size
    roles: dict[str, list[float]] = {}  # Engine.run_graph's seconds by graph

    def phased(call: Any) -> Any:
        def run(search: Any, *args: Any, **kwargs: Any) -> Any:
            size, started = len(search), time.perf_counter()
            out = call(search, *args, **kwargs)
            phases.setdefault(_phase(size), []).append(time.perf_counter() - started)
            return out

        return run

    def by_role(call: Any) -> Any:
        def run(role: str, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            out = call(role, *args, **kwargs)
            roles.setdefault(role, []).append(time.perf_counter() - started)
            return out

        return run

    options = DecodeOptions(beam_size=4)
    if "--server-options" in argv:
        options = DecodeOptions(
            beam_size=4, no_repeat_ngram_size=DEFAULT_NO_REPEAT_NGRAM_SIZE, length_penalty=DEFAULT_LENGTH_PENALTY
        )
    graph_ks: dict[int, int] = {}  # steps a pass by the top-k their graph ran
    step = static_state.StaticState.step

    def counted(self: Any, tokens: Any, positions: Any, reorder: Any, k: int, attention: bool = True) -> Any:
        graph_k = min(static_state.bucket(k), engine.vocab_size)
        graph_ks[graph_k] = graph_ks.get(graph_k, 0) + 1
        return step(self, tokens, positions, reorder, k, attention)

    static_state.StaticState.step = counted  # type: ignore[method-assign]  # inside the timing below
    static_state._run = timed("run", static_state._run)  # type: ignore[assignment]
    static_state.StaticState.step = timed("step", static_state.StaticState.step)  # type: ignore[method-assign]
    static_state.StaticState.admit = timed("admit", static_state.StaticState.admit)  # type: ignore[method-assign]
    static_state.EncoderBucket.run = timed("encode", static_state.EncoderBucket.run)  # type: ignore[method-assign]
    engine.run_graph = timed("graphs", by_role(engine.run_graph))  # type: ignore[method-assign]
    beam_search.BeamSearch.step = timed("search", phased(beam_search.BeamSearch.step))  # type: ignore[method-assign]
    for attempt in range(5):
        names = ("run", "step", "admit", "encode", "graphs", "search")
        totals.update({key: 0.0 for name in names for key in (name, name + "s")})
        phases.clear()
        roles.clear()
        graph_ks.clear()
        started = time.perf_counter()
        for start in range(0, len(texts), batch):
            engine.translate(texts[start : start + batch], options)
        whole = time.perf_counter() - started
        steps = max(1, int(totals["steps"]))
        if attempt:  # the first pass opens the buckets
            search = (totals["search"] - totals["step"]) / steps
            print(
                f"batch {batch}: host {(totals['step'] - totals['run']) / steps * 1e6:.1f} us a step, "
                f"graph run {totals['run'] / steps * 1e6:.0f} us, search {search * 1e6:.0f} us "
                f"(ARRAYS_FROM {beam_search.ARRAYS_FROM}), {steps} steps; a sentence's admission "
                f"{totals['admit'] / len(texts) * 1e3:.2f} ms (encoder {totals['encode'] / len(texts) * 1e3:.2f}), "
                f"graphs run by Engine.run_graph {totals['graphs'] / len(texts) * 1e3:.2f} ms",
                flush=True,
            )
            # Where a pass's time goes: the steps by how many sentences their set held (at batch 128 a set's last
            # few sentences run half its steps: session 43), and the uncaptured graphs by name
            shares = ", ".join(
                f"{name} {len(phases[name])} steps {sum(phases[name]) * 1e3:.1f} ms"
                for name in PHASES
                if name in phases
            )
            graphs = ", ".join(f"{role} {len(t)}x {sum(t) * 1e3:.1f} ms" for role, t in sorted(roles.items()))
            print(f"  pass {whole * 1e3:.1f} ms; steps by sentences in the set: {shares}; graphs: {graphs}", flush=True)
            ks = ", ".join(f"{k}: {n}" for k, n in sorted(graph_ks.items()))
            print(f"  steps by graph k: {ks}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
