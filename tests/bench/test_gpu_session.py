"""bench/gpu_session: the onnxruntime-gpu wheel thinned to one GPU generation for the device tool's transfers."""

from __future__ import annotations

import io
import lzma
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from bench import gpu as gpu_bench
from bench.gpu_session.thin_wheel import MAGIC, thin

ROOT = Path(__file__).resolve().parents[2]


def container(images: list[tuple[int, bytes]]) -> bytes:
    """A fatbin container as the CUDA toolchain lays it out: a 16-byte header, then per image a 64-byte header
    (kind, version, header size, payload size, ..., the compute capability at byte 28) and its payload."""
    body = b""
    for sm, payload in images:
        header = bytearray(64)
        struct.pack_into("<HHII", header, 0, 2, 0x0101, 64, len(payload))
        struct.pack_into("<I", header, 28, sm)
        body += bytes(header) + payload
    return MAGIC + struct.pack("<HHQ", 1, 16, len(body)) + body


def test_only_the_kept_generation_keeps_its_kernels() -> None:
    a, b, c, d, e = (bytes([v]) * 3 for v in (0xA1, 0xB2, 0xC3, 0xD4, 0xE5))  # bytes no header holds
    images = [(80, a * 33), (90, b * 17), (120, c * 10)]
    data = bytearray(b"ELF-prefix" + container(images) + b"tail" + container([(90, d * 3), (86, e * 3)]))
    before = len(data)
    kept, zeroed = thin(data, 90)
    assert (kept, zeroed) == (2, 99 + 30 + 9)
    assert len(data) == before  # the layout does not move
    assert b * 17 in data and d * 3 in data
    assert a not in data and c not in data and e not in data
    assert data.startswith(b"ELF-prefix") and b"tail" in data


def test_the_thinned_package_unpacks_with_the_kept_kernels(tmp_path: Path) -> None:
    wheel = tmp_path / "onnxruntime_gpu-0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("onnxruntime/__init__.py", "x = 1\n")
        z.writestr("onnxruntime/capi/libonnxruntime_providers_cuda.so", container([(75, b"F" * 40), (90, b"G" * 40)]))
        z.writestr("onnxruntime/capi/libonnxruntime_providers_tensorrt.so", b"trt")
    out = tmp_path / "ort.tar.xz"
    script = ROOT / "bench" / "gpu_session" / "thin_wheel.py"
    subprocess.run([sys.executable, str(script), str(wheel), str(out)], check=True, capture_output=True)
    with lzma.open(out) as xz, tarfile.open(fileobj=io.BytesIO(xz.read())) as tar:
        names = tar.getnames()
        cuda = tar.extractfile("onnxruntime/capi/libonnxruntime_providers_cuda.so").read()  # type: ignore[union-attr]
    assert "onnxruntime/__init__.py" in names
    assert not any(n.endswith("tensorrt.so") for n in names)
    assert b"G" * 40 in cuda and b"F" not in cuda


def test_node_placements_are_read_from_the_verbose_log() -> None:
    from bench.gpu_session.placement import placements

    prefix = "2026-11-25 10:53:06.79 [V:onnxruntime:, session_state.cc:1581 VerifyEachNodeIsAssignedToAnEp]"
    mixed = "\n".join(
        [
            f"{prefix} Node placements",
            f"{prefix}  Node(s) placed on [CUDAExecutionProvider]. Number of nodes: 2",
            f"{prefix}   MatMul (/a/MatMul)",
            f"{prefix}   Add (/a/Add)",
            f"{prefix}  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1",
            f"{prefix}   Range (/Range)",
            "2026-11-25 10:53:06.80 [V:onnxruntime:, other.cc:1 Other]   not a node",
        ]
    )
    counts, nodes = placements(mixed)
    assert counts == {"CUDAExecutionProvider": 2, "CPUExecutionProvider": 1}
    assert nodes["CPUExecutionProvider"] == ["Range (/Range)"]
    assert nodes["CUDAExecutionProvider"] == ["MatMul (/a/MatMul)", "Add (/a/Add)"]
    single = f"{prefix}  All nodes placed on [CPUExecutionProvider]. Number of nodes: 109"
    assert placements(single) == ({"CPUExecutionProvider": 109}, {"CPUExecutionProvider": []})


def device_step(step: str) -> str:
    """The body of one step of device.sh, continuation lines joined."""
    text = (ROOT / "bench" / "gpu_session" / "device.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    return text.split(f"\n  {step})\n", 1)[1].split(";;", 1)[0]


def device_commands(step: str) -> list[list[str]]:
    """The ``python3 -m bench`` command lines of one step of device.sh, ``$OUT`` standing for a folder, the pipes
    after them cut off."""
    import shlex

    commands = []
    for line in device_step(step).splitlines():
        if "python3 -m bench " not in line:
            continue
        command = line[line.index("python3 -m bench ") :].split("2>&1")[0].replace('"$OUT', '"/tmp/out')
        commands.append(shlex.split(command)[3:])
    return commands


def _parse_each(commands: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``python -m bench`` command line parses with its bench's own parser (exit status 2 on a bad argument)."""
    import argparse
    import importlib

    from bench.__main__ import COMMANDS

    class Parsed(Exception):
        pass

    original = argparse.ArgumentParser.parse_args

    def parse_only(self: argparse.ArgumentParser, args: object = None, namespace: object = None) -> object:
        original(self, args, namespace)  # type: ignore[arg-type]  # exits with status 2 on unknown arguments
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    for words in commands:
        with pytest.raises(Parsed):
            importlib.import_module(COMMANDS[words[0]]).main(words[1:])


def test_the_targets_run_measures_every_target_with_arguments_the_benches_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """device.sh targets is the one run a 15-minute device session has room for: each of its bench commands must
    parse as written (a typo there would cost the whole session), and together they must cover the targets."""
    commands = device_commands("targets")
    _parse_each(commands, monkeypatch)
    gpu = [w for w in commands if w[0] == "gpu"]
    systems = {s for w in gpu for s in w[w.index("--systems") + 1].split(",")}
    assert {"cuda-fp32", "cuda-fp16-static", "cuda-fp32-static"} <= systems  # fp16 against fp32, CUDA graphs
    assert "cuda-fp16-fused-static-lanes2" in systems  # session 45's lanes beside the one set they split
    assert "cuda-fp16-fused-static-dmmha" in systems  # session 46's one-kernel self-attention beside the default
    assert systems <= set(gpu_bench.SYSTEMS), systems - set(gpu_bench.SYSTEMS)  # bench gpu drops unknown names
    assert any("1" in w[w.index("--batch-sizes") + 1].split(",") for w in gpu)  # batch 1 ms a sentence
    assert any("128" in w[w.index("--batch-sizes") + 1].split(",") for w in gpu)  # batch 128 tok/s
    assert any("--random" in w and w[w.index("--random") + 1] == "base" for w in gpu)  # the base preset
    load = [w for w in commands if w[0] == "load"]
    assert load and {"64", "128"} <= set(load[0][load[0].index("--levels") + 1].split(","))  # the server target
    servers = load[0][load[0].index("--servers") + 1].split(",")
    assert servers[0] == "continuous"  # the GPU defaults first, the static servers (one lane, then two) last
    assert servers[-2:] == ["continuous:static-step", "continuous:static-step+inflight-batches=2+lanes=2"]


def test_the_batch1_run_takes_arguments_the_bench_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """device.sh batch1, the third run of a session with time left: its command parses as written."""
    commands = device_commands("batch1")
    assert [words[0] for words in commands] == ["search-cost", "search-cost", "gpu", "ort-beam-search"]
    _parse_each(commands, monkeypatch)
    from bench.gpu import SYSTEMS  # bench gpu skips a system it does not know: the lean step's pair must be known

    (gpu,) = [words for words in commands if words[0] == "gpu"]
    assert (
        set(gpu[gpu.index("--systems") + 1].split(","))
        == {"cuda-fp16w-fused", "cuda-fp16w-fused-full", "cuda-fp16w-fused-masked"}
        <= set(SYSTEMS)
    )


def test_the_batch1_runs_of_static_host_pass_only_flags_it_reads() -> None:
    """static_host.py reads its flags off argv by hand, ignoring any other: each flag device.sh batch1 gives it
    (those of its loops too, as ``--copy-windows``) must be one it reads, or the run measures the default silently."""
    import shlex

    source = (ROOT / "bench" / "gpu_session" / "static_host.py").read_text(encoding="utf-8")
    body = device_step("batch1")
    flags = {w for line in body.splitlines() if "static_host.py" in line for w in shlex.split(line) if w[:2] == "--"}
    loops = [line for line in body.splitlines() if line.strip().startswith("for ")]
    flags |= {w.rstrip(";") for line in loops for w in line.split() if w[:2] == "--"}
    assert {"--provider", "--full", "--arrays-from", "--copy-windows"} <= flags
    assert all(f'"{flag}"' in source for flag in flags), [f for f in flags if f'"{f}"' not in source]


def test_the_profile_server_run_takes_arguments_the_bench_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """device.sh profile-server: its load runs long enough for py-spy's 25 s of samples, and parses as written."""
    commands = device_commands("profile-server")
    assert [words[0] for words in commands] == ["load"]
    _parse_each(commands, monkeypatch)
    (load,) = commands
    assert load[load.index("--levels") + 1] == "128" and int(load[load.index("--requests") + 1]) >= 10_000


def test_the_shipped_run_serves_the_bundle_stage_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """device.sh shipped serves make serve's own bundle, the copy stage.sh leaves in .gpu/shipped, on the GPU."""
    commands = device_commands("shipped")
    assert [words[0] for words in commands] == ["load"]
    _parse_each(commands, monkeypatch)
    (load,) = commands
    assert load[load.index("--bundle") + 1] == ".gpu/shipped" and load[load.index("--provider") + 1] == "auto"
    assert 'cp -r models/en-de "$G/shipped"' in (ROOT / "bench/gpu_session/stage.sh").read_text()


def test_the_targets_run_measures_the_admission_graphs_with_a_script_that_exists() -> None:
    """device.sh targets times the static path's own graphs at batch 1 and 128 (bench/gpu_session/admission.py)."""
    body = device_step("targets")
    assert "bench/gpu_session/admission.py /tmp/bundle" in body and "for B in 1 128" in body
    assert (ROOT / "bench" / "gpu_session" / "admission.py").is_file()


def test_the_admission_script_times_and_profiles_the_static_graphs(tiny_static_bundle: Path, tmp_path: Path) -> None:
    """admission.py on the CPU: each static graph the engine ran has its time a call, and onnxruntime's profile of
    it lists nodes on the provider that ran them, whose times fit inside the run's."""
    import json

    from bench.gpu_session.admission import main
    from inference.static_state import EncoderBucket

    run = EncoderBucket.run
    source = tmp_path / "in.tsv"
    source.write_text("".join(f"{'a b c d e f'[: 2 * n + 1]}\tx\n" for n in range(6)), encoding="utf-8")
    out = tmp_path / "report.json"
    assert (
        main([str(tiny_static_bundle), str(source), "2", "--sentences", "6", "--repeats", "3", "--out", str(out)]) == 0
    )
    report = json.loads(out.read_text(encoding="utf-8"))
    assert len(report["passes"]) == 3 and all(p["calls"]["place"] >= 3 for p in report["passes"])
    assert report["mid-run"]["calls"]["place"] == 6  # on the CPU no encoder bucket writes into a set's buffers
    assert EncoderBucket.run is run  # its timing wrapper is gone: later engines in this process run the real one
    place = report["graphs"]["place"]
    assert place["as run"] > 0 and place["own outputs"] > 0
    nodes = place["profiled"]["nodes"]
    assert {row["op"] for row in nodes} >= {"ScatterND", "Pad"}
    assert {row["provider"] for row in nodes} == {"CPUExecutionProvider"}
    assert 0 < place["profiled"]["nodes_us"] <= place["profiled"]["run_us"] * 1.05


def test_the_graph_calls_script_counts_the_grows_a_new_sets_first_columns_avoid(
    tiny_static_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """graph_calls.py on the CPU: with a new set at the fewest cache columns the tiny model's sentences grow them;
    with room for their sources and more, none does; --reach prints each slack's grows."""
    from bench.gpu_session.graph_calls import main
    from inference import static_state
    from inference.engine import DeviceState

    monkeypatch.setattr(static_state, "MIN_COLUMNS", 4)
    monkeypatch.setattr(static_state, "COLUMNS_SLACK", static_state.COLUMNS_SLACK)  # main sets it: undone after
    grow, step = static_state.StaticState._grow, DeviceState.step
    source = tmp_path / "in.tsv"
    source.write_text("".join(f"{'a b c d e f g h'[: 2 * n + 1]}\tx\n" for n in range(8)), encoding="utf-8")
    for slack in ("-1000", "1000"):
        assert main([str(tiny_static_bundle), str(source), "1", "--columns-slack", slack]) == 0
    fewest, roomy = capsys.readouterr().out.split("COLUMNS_SLACK ")[1:]
    assert "'grow':" in fewest and "columns 4->8" in fewest
    assert "graph calls: none; grow moves: none" in roomy
    assert main([str(tiny_static_bundle), str(source), "1", "--reach"]) == 0
    assert "8 sentences alone" in capsys.readouterr().out
    assert (static_state.StaticState._grow, DeviceState.step) == (grow, step)  # the recording wrappers are gone


def test_the_stack_sampler_writes_where_each_thread_of_a_process_is(tmp_path: Path) -> None:
    """stack_dump/sitecustomize.py in a process started with STACK_SAMPLES: its samples, in py-spy's raw form, put the
    busy main thread in its function nearly always; stacks.py reads them."""
    from bench.gpu_session.stacks import read

    script = tmp_path / "busy.py"
    script.write_text(
        "import time\n\ndef busy_here():\n    t = time.monotonic()\n    while time.monotonic() - t < 1.5:\n"
        "        sum(range(1000))\n\nbusy_here()\n",
        encoding="utf-8",
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT / "bench" / "gpu_session" / "stack_dump"),
        "STACK_SAMPLES": str(tmp_path / "{pid}.txt"),
        "STACK_SAMPLES_DELAY": "0.2",
        "STACK_SAMPLES_FOR": "0.8",
    }
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=60)
    (written,) = tmp_path.glob("[0-9]*.txt")
    samples = read(written)
    main = [(stack, count) for stack, count in samples if stack[0].endswith("MainThread")]
    total = sum(count for _, count in main)
    assert total >= 20  # every 5 ms for 0.8 s, as often as the busy thread hands over the GIL
    assert sum(count for stack, count in main if stack[-1].startswith("busy_here (")) >= 0.9 * total


def test_the_cache_layouts_attend_as_the_static_steps_own_layer(tmp_path: Path) -> None:
    """cache_step.py on the CPU: every layout's one-layer graph (the dynamic step's plain one, a clock's columns,
    onnxruntime's DecoderMaskedMultiHeadAttention with a gather and with a beam index) gives the attention output of
    the static step's own layer on the same history, reordered within each sentence's rows; a layout that read a
    wrong column or row would not (its exit status is then 1)."""
    import json

    from bench.gpu_session.cache_step import KINDS, main

    out = tmp_path / "cache-step.json"
    assert main(["--rows", "4,8", "--columns", "8,16", "--repeats", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert len(report["results"]) == 4
    for row in report["results"]:
        assert row["same_output"] is True
        assert all(row[f"{kind}_us"] > 0 for kind in KINDS)  # every layout ran on the CPU


def test_the_batch1_run_times_the_cache_layouts_with_arguments_the_script_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """device.sh batch1 runs cache_step.py on CUDA, captured and not: each of its command lines parses."""
    import argparse
    import shlex

    from bench.gpu_session import cache_step

    lines = [line for line in device_step("batch1").replace("\\\n", " ").splitlines() if "cache_step.py" in line]
    assert len(lines) == 2

    class Parsed(Exception):
        pass

    original = argparse.ArgumentParser.parse_args

    def parse_only(self: argparse.ArgumentParser, args: object = None, namespace: object = None) -> object:
        parsed = original(self, args, namespace)  # type: ignore[arg-type]  # exits with status 2 on a bad argument
        assert parsed.provider == "cuda" and getattr(parsed, "dtype", "fp16") == "fp16"
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    for line in lines:
        words = shlex.split(line.split("2>&1")[0])
        with pytest.raises(Parsed):
            cache_step.main(words[words.index("bench/gpu_session/cache_step.py") + 1 :])
    from bench.gpu_session import masked_step

    (line,) = [line for line in device_step("batch1").replace("\\\n", " ").splitlines() if "masked_step.py" in line]
    words = shlex.split(line.split("2>&1")[0])
    with pytest.raises(Parsed):  # parses before the model is built
        masked_step.main(words[words.index("bench/gpu_session/masked_step.py") + 1 :])


def test_the_masked_step_decodes_as_the_engines_step_on_the_same_history(tmp_path: Path) -> None:
    """masked_step.py on the CPU: the decoder step on DecoderMaskedMultiHeadAttention (a cache that never moves, read
    through a beam index) gives the top-k and attention rows of the dynamic step the engine runs, on states holding
    the same history (exit status 1 otherwise), at two batch sizes and positions."""
    import json

    from bench.gpu_session.masked_step import main

    out = tmp_path / "masked.json"
    args = ["--model", "tiny", "--batch-sizes", "1,3", "--positions", "2,7", "--columns", "16", "--repeats", "10"]
    assert main([*args, "--out", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert len(results) == 4 and all(r["same_topk"] and r["masked_us"] > 0 for r in results)


def test_the_masked_step_in_pytorch_is_the_step_it_replaces() -> None:
    """DecoderStep(masked=True) run in PyTorch (BeamCachedAttention's own arithmetic, which the export's parity
    checks would compare against) gives the dynamic step's outputs on the same history, and the buffers back with
    the step's column written and no other."""
    import torch

    from bench.gpu_session.masked_step import _model, states
    from training.incremental import DecoderStep

    model = _model("tiny")
    layers = model.config.decoder_layers
    now, masked = states(model, batch=3, t=5, columns=12, seed=7)
    names = ["tokens", "positions", "reorder", "k", "src_mask"]
    cross = [now[f"cross_{kv}_{i}"] for i in range(layers) for kv in "kv"]
    past = [now[f"past_{kv}_{i}"] for i in range(layers) for kv in "kv"]
    buffers = [masked[f"past_{kv}_{i}"] for i in range(layers) for kv in "kv"]
    with torch.no_grad():
        expected = DecoderStep(model)(*(torch.as_tensor(now[n]) for n in names), *map(torch.as_tensor, cross + past))
        got = DecoderStep(model, masked=True)(
            *(torch.as_tensor(masked[n]) for n in ["tokens", "positions", "beams", "k", "src_mask", "own", "step"]),
            *map(torch.as_tensor, cross + buffers),
        )
    assert torch.equal(expected[1], got[1])  # top-k ids
    torch.testing.assert_close(expected[0], got[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(expected[2], got[2], atol=1e-6, rtol=1e-5)  # attention rows
    for grown, written, before in zip(expected[3:], got[3:], buffers, strict=True):
        torch.testing.assert_close(written[:, :, 5], grown[:, :, 5])  # the new column: what the grown cache appended
        others = [c for c in range(12) if c != 5]
        assert torch.equal(written[:, :, others], torch.as_tensor(before)[:, :, others])


def test_the_masked_run_serves_the_default_and_the_masked_step_from_a_bundle_that_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """device.sh masked serves /tmp/bundle with and without MT_MASKED_STEP: targets must export it with the graph."""
    commands = device_commands("masked")
    assert [words[0] for words in commands] == ["load"]
    _parse_each(commands, monkeypatch)
    (load,) = commands
    assert load[load.index("--servers") + 1].split(",") == ["continuous", "continuous:masked-step"]
    export = [
        line for line in device_step("targets").splitlines() if "training export" in line and "/tmp/bundle" in line
    ]
    assert len(export) == 1 and "--masked-step" in export[0]


def test_the_node_counts_show_each_lean_step_smaller_than_its_full_one(
    tiny_fused_bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """graph_nodes.py on a fused GPU set with static steps: a line per step graph, each lean one with fewer nodes than
    its full step, the static ones also counted as onnxruntime optimizes them with a batch-1 bucket fixed."""
    from bench.gpu_session.graph_nodes import main

    main([str(tiny_fused_bundle)])
    import re

    counts = {}  # role -> its node counts: besides constants, then (static steps) optimized
    for line in capsys.readouterr().out.splitlines():
        role, rest = line.split(": ", 1)
        counts[role] = [int(n) for n in re.findall(r"(\d+) nodes", rest)]
    assert set(counts) == {"decoder", "decoder_lean", "static_decoder", "static_decoder_lean"}
    assert len(counts["decoder"]) == 1 and len(counts["static_decoder"]) == 2
    for full in ("decoder", "static_decoder"):
        assert all(lean < whole for lean, whole in zip(counts[f"{full}_lean"], counts[full], strict=True))


def test_the_first_device_run_times_the_hosts_python_with_numpy_alone() -> None:
    """``device.sh part`` runs host_speed.py on a fresh machine whose Python has numpy and torch but neither httpx
    nor onnxruntime: the script must not import them (bench.search_cost would, through bench.loadtools), and it
    prints the search's own cost a step at batch 1 and 128."""
    script = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('httpx', 'onnxruntime') or name == 'bench.loadtools':\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "sys.argv = ['host_speed.py']\n"
        "import runpy\n"
        f"runpy.run_path({str(ROOT / 'bench/gpu_session/host_speed.py')!r}, run_name='__main__')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("search a step, batch 1:") for line in lines)
    assert any(line.startswith("search a step, batch 128:") for line in lines)
    device = (ROOT / "bench/gpu_session/device.sh").read_text(encoding="utf-8")
    part = device[device.index("  part)") : device.index(";;", device.index("  part)"))]
    assert "bench/gpu_session/host_speed.py" in part
