#!/usr/bin/env bash
# Runs ON the GPU machine, from the project root (see stage.sh for the order of the runs).
#   device.sh part 1          keep the first onnxruntime-gpu part in /tmp (the machine's start pays for it)
#   device.sh targets         join the parts, install, and measure every #23 / #24 target in one run (at most
#                             510 s of benches): with 15 minutes of device time a session, run this one after part 1
#   device.sh shipped         after batch1: the shipped models/en-de (copied to .gpu/shipped) served on CUDA
#   device.sh masked          after batch1: the GPU server with its caches in place (MT_MASKED_STEP) and without
#   device.sh profile-server  after targets: the stacks of the server's threads (its engine process's too) under
#                             128 clients, each process dumping its own (faulthandler: py-spy cannot attach there)
#   device.sh measure-engine  join the parts, install, pytest -m gpu, bench gpu (0.7.0: fp32 / fp16w / fp16w with
#                             static-shape steps replayed as CUDA graphs, and without capture; fp16w with fused
#                             attention, launched and replayed)
#   device.sh measure-more    the base preset with random weights (the same systems), fused against plain graphs
#                             (bench attention), placement of the GPU graphs (the static step's included),
#                             onnxruntime's BeamSearch operator against our loop, the search's own cost a step
#                             on the host's CPU (bench search-cost, printed), a sentence alone and batched on CUDA
#                             (bench batch-mates, printed)
#   device.sh measure-server  bench load on CUDA: the continuous scheduler as shipped, with static-shape steps
#                             (CUDA graphs) and with grouped admissions, the batch scheduler, mixed lengths
# Reports go to $OUT (8 files come back per run): copy them to docs/reports/gpu/ and say so in the docs.
set -uo pipefail
step=${1:?part N | targets | floor | batch1 | shipped | masked | profile-server | measure-engine | measure-more | measure-server}
quiet() { grep -v -E "Warning|ScatterND|^\s*$" || true; }
setup() {  # run 2 of a session: join the onnxruntime-gpu parts, install them and the wheels, copy the model
  cp .gpu/p2/chunk.* /tmp/ortparts/
  cat /tmp/ortparts/chunk.* > /tmp/ort.tar.xz
  echo "$(cat .gpu/p2/sha)  /tmp/ort.tar.xz" | sha256sum -c --quiet || { echo "onnxruntime-gpu parts incomplete"; return 3; }
  mkdir -p /tmp/site && tar -xJf /tmp/ort.tar.xz -C /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl 2>&1 | grep -v WARNING
  SP=$(python3 -c "import site; print(site.getsitepackages()[0])")
  LIBS=$(find "$SP/nvidia" -maxdepth 3 -name lib -type d | paste -sd:)
  echo "export LD_LIBRARY_PATH=$LIBS:\${LD_LIBRARY_PATH:-}; export PYTHONUNBUFFERED=1; export PYTHONPATH=/tmp/site" > /tmp/gpu-env.sh
  . /tmp/gpu-env.sh
  cp -r .gpu/model /tmp/model
  python3 -c "import onnxruntime as o; assert 'CUDAExecutionProvider' in o.get_available_providers(); print('onnxruntime', o.__version__)"
}
case "$step" in
  part)
    mkdir -p /tmp/ortparts && cp .gpu/p"${2:?N}"/chunk.* /tmp/ortparts/ && ls -la /tmp/ortparts && nvidia-smi -L
    # session 47: how fast this host runs the engine's Python (numpy only, a few seconds): on session 42's H100 the
    # search alone was ~4x slower a step than on the 2-core VM, where the same lines read, for comparison,
    # pure Python 23.5-26.9 us, search 0.009-0.010 ms at batch 1 and 0.226-0.230 ms at 128
    PYTHONPATH=. timeout 60 python3 bench/gpu_session/host_speed.py 2>&1 | tee "$OUT/host-speed.txt" ;;
  targets)
    # Every #23 / #24 target in one run (give it timeout_s 590: its steps' timeouts add up to 640 s, session 42's run took
    # 411 s, plus the install and one export): what a task's 15 minutes of device time hold after the start and run 1.
    # At most 8 files come back: this step leaves 8. The measure-* runs below go further, where time is left.
    setup || exit 3
    # (session 42's 16 tests took 70.6 s of a 70 s timeout; 22 now, one of them exporting a model)
    timeout 120 python3 -m pytest -m gpu -q -rf -p no:cacheprovider tests/inference/test_cuda.py 2>&1 | tail -8 | tee "$OUT/pytest-gpu.txt"
    # batch 1 ms a sentence, batch 128 tok/s, fp16 against fp32 (speed and identical outputs), CUDA graphs, fused
    # (session 45: and the fused fp16 static steps with a batch of 128 split into two lanes, two running sets each on
    # a thread and sessions of its own, one replaying while the host searches the other: 1.11-1.26x one lane on the
    # 2-core CPU; session 46: and the fused fp16 static step whose self-attentions are each one
    # DecoderMaskedMultiHeadAttention, its keys in CUDA's layout: --static-attention decoder-masked, an export more)
    timeout 200 python3 -m bench gpu --checkpoint /tmp/model/model.pt --input /tmp/model/test.tsv --beams 4 \
      --batch-sizes 1,128 --sentences 128 --repeats 2 \
      --systems cuda-fp32,cuda-fp16,cuda-fp32-static,cuda-fp16-static,cuda-fp16-fused-static,cuda-fp16-fused-static-lanes2,cuda-fp16-fused-static-dmmha \
      --out "$OUT/targets" 2>&1 | quiet
    # the base preset at batch 32 (>= 11,000 tok/s asked)
    [ -d /tmp/model/base-vocab ] && timeout 60 python3 -m bench gpu --random base --vocab /tmp/model/base-vocab \
      --input /tmp/model/test.tsv --beams 4 --batch-sizes 32 --max-length 28 --repeats 2 \
      --systems cuda-fp32,cuda-fp16-static --out "$OUT/targets-base" 2>&1 | quiet
    # the server, as shipped and with CUDA graphs, at 64 and 128 clients (>= 450 sentences/s asked)
    python3 -m training export /tmp/model/model.pt /tmp/bundle --gpu-dtype fp16w --static-step --masked-step 2>&1 \
      | quiet | tail -1
    # what the static path's own graphs (place, grow, compact: never captured) cost a call at batch 1 and 128, and
    # node by node where a call's time goes (session 36: a sentence's admission 3.3 ms of a 10.6 ms sentence)
    for B in 1 128; do
      PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/admission.py /tmp/bundle /tmp/model/test.tsv $B \
        --provider cuda 2>&1 | grep -v -E "Warning|ScatterND with|^\s*$" | tail -32 | tee "$OUT/admission-b$B.txt"
    done
    # the server's GPU defaults (one running set of up to 128 sentences and 16384 tokens, admitting every 8 steps,
    # the models and the scheduler in a process of their own: MT_ENGINE_PROCESS unset is on there since session 27),
    # with two running sets (session 45: each on a decoder session of its own, MT_LANES=2; two sets sharing one
    # served no more than one in sessions 36 and 42), and with CUDA graphs: their buckets opened at load (MT_STATIC_WARM, session 30; the
    # report says how long each server took to be ready), and (session 45, in place of the static server opening its
    # buckets on first use, measured in sessions 27, 36 and 42) two running sets each stepping on static sessions of
    # its own (MT_LANES=2), every lane's buckets opened at load. The static servers go last: the report is rewritten
    # after each server, so a timeout keeps the others'.
    # (2048 requests a level: with 512 or 768, a level at 128 clients lasted about a second, ramp and drain included)
    timeout 220 python3 -m bench load --bundle /tmp/bundle --input /tmp/model/test.tsv --provider auto --threads 4 \
      --requests 2048 --warmup-requests 256 --deadline 15 --levels 64,128 \
      --servers continuous,continuous:inflight-batches=2+lanes=2,continuous:static-step,continuous:static-step+inflight-batches=2+lanes=2 \
      --out "$OUT/targets-load" 2>&1 | quiet | tail -45
    rm -f "$OUT"/*.png "$OUT"/targets-base.json ;;
  floor)
    # Run 2 of session 27 (after part 1 on a fresh machine; carry as targets; timeout_s 400): what a replayed
    # batch-1 step is made of (bench/gpu_session/replay_floor.py), plain and fused attention, then the server as it
    # now starts on a GPU (the engine process by default) against the same in one process, 1 to 128 clients
    setup || exit 3
    python3 -m training export /tmp/model/model.pt /tmp/bundle --gpu-dtype fp16w --static-step --gpu-attention plain 2>&1 | quiet | tail -1
    python3 -m training export /tmp/model/model.pt /tmp/fused --gpu-dtype fp16 --static-step --gpu-attention fused \
      2>&1 | quiet | tail -1
    for B in bundle fused; do
      PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/replay_floor.py /tmp/$B /tmp/model/test.tsv 2>&1 \
        | quiet | tail -7 | tee "$OUT/replay-floor-$B.txt"
    done
    timeout 200 python3 -m bench load --bundle /tmp/bundle --input /tmp/model/test.tsv --provider auto --threads 4 \
      --requests 2048 --warmup-requests 256 --deadline 15 --levels 1,16,64,128 \
      --servers continuous,continuous:no-engine-process --out "$OUT/load-default" 2>&1 | quiet | grep -E "clients:"
    rm -f "$OUT"/*.png ;;
  batch1)
    # Run 3 when the session has 5 minutes left after targets (nothing carried: /tmp holds what targets set up;
    # timeout_s 300: session 42's took 90 s, session 43 added about a minute of benches, session 46 an export and
    # four short static_host runs):
    # the host's own time around a replayed static step at batch 1 (what stands between replays; 58.7-62.4 us on
    # the 2-core CPU in session 26) and at batch 128, then onnxruntime's BeamSearch operator, the whole search in
    # one run, against our loop at batch 1 and 32 on CUDA (measured in session 25: keep it last)
    . /tmp/gpu-env.sh
    PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/static_host.py /tmp/bundle /tmp/model/test.tsv 1 \
      --provider cuda 2>&1 | quiet | tail -8 | tee "$OUT/static-host-b1.txt"
    # session 44: the runs above replayed the lean static step (static_decoder_lean, the default on CUDA); the same
    # with the full one every step, at batch 1 and 128: what the 14 nodes of attention rows cost a replay
    for B in 1 128; do
      PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/static_host.py /tmp/bundle /tmp/model/test.tsv $B \
        --provider cuda --full 2>&1 | quiet | tail -2 | sed 's/^/full step: /' | tee -a "$OUT/static-host-b$B.txt"
    done
    # and what a batch-128 step's graph (0.42 ms a step on average in session 42, the tail's small steps included)
    # is made of: its kernels by GPU time, launched one by one (the same kernels a replay runs)
    PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/kernels.py /tmp/bundle /tmp/model/test.tsv --batch 128 \
      2>&1 | quiet | tail -32 | tee -a "$OUT/static-host-b128.txt"
    # session 43: one self-attention layer's cache a step, as the static step keeps it (gather, drop a column,
    # concatenate) against the layouts that move less, DecoderMaskedMultiHeadAttention with a beam index among them
    # (on the 2-core CPU 0.21-0.69x the static step's layer, the same outputs), replayed as CUDA graphs and launched
    PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/cache_step.py --provider cuda --dtype fp16 \
      --rows 4,512 --columns 32,64,128 2>&1 | quiet | tee "$OUT/cache-step.txt"
    PYTHONPATH=.:/tmp/site timeout 40 python3 bench/gpu_session/cache_step.py --provider cuda --dtype fp16 \
      --rows 4,512 --columns 64 --no-capture 2>&1 | quiet | tail -4 | tee -a "$OUT/cache-step.txt"
    # and the whole decoder step on that kernel (a cache that never moves, read through a beam index) against the
    # dynamic step a GPU server runs, fp32, on states that hold the same history (on the 2-core CPU 0.84-0.98x at
    # batch 32, 0.89-1.15x at batch 1; the same top-k). With NO_ORT=1 this run leaves 8 files.
    PYTHONPATH=.:/tmp/site timeout 120 python3 bench/gpu_session/masked_step.py --provider cuda --threads 4 \
      --batch-sizes 1,32,128 --positions 16,32,64 --repeats 200 2>&1 | quiet | tail -14 | tee "$OUT/masked-step.txt"
    # session 42: on the H100 a `place` call took 10 ms and a batch-1 `grow` 2.4, their nodes' launches 0.2-0.4 ms;
    # the kernels and copies each call ran on the device, by GPU time (--kernels: torch's profiler), then with every
    # launch blocking, so that each node's profiled time holds its kernel's run: where the rest goes
    PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/admission.py /tmp/bundle /tmp/model/test.tsv 1 \
      --provider cuda --repeats 20 --kernels 2>&1 | grep -v -E "Warning|ScatterND with|^\s*$" | tail -60 \
      | tee "$OUT/admission-kernels-b1.txt"
    CUDA_LAUNCH_BLOCKING=1 PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/admission.py /tmp/bundle \
      /tmp/model/test.tsv 1 --provider cuda --repeats 20 2>&1 | grep -v -E "Warning|ScatterND with|^\s*$" | tail -32 \
      | tee "$OUT/admission-blocking-b1.txt"
    # the same at batch 128, and the search's own Python a step there: on the 2-core CPU (session 29) the static
    # state's time beside the run was 379-443 us (most of it bucket moves) and the search 571 us at 128, of a step
    # the H200 took 1.7 ms in all
    # (appended: the full step's line and the kernel table above are in this file already)
    PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/static_host.py /tmp/bundle /tmp/model/test.tsv 128 \
      --provider cuda 2>&1 | quiet | tail -8 | tee -a "$OUT/static-host-b128.txt"
    # session 48: the same with the server's search options (its n-gram guard and length penalty): the host's work a
    # step and the graph k each step replayed (the guard widened most steps to k 16 before session 48)
    PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/static_host.py /tmp/bundle /tmp/model/test.tsv 128 \
      --provider cuda --server-options 2>&1 | quiet | tail -3 | sed 's/^/server options: /' \
      | tee -a "$OUT/static-host-b128.txt"
    # session 46: the decoder-masked static step (its self-attention one DecoderMaskedMultiHeadAttention, keys in
    # CUDA's layout), its windows gathered straight into the presents and (--copy-windows) copied there by the kernel
    # as before: the graph run a step at 1 and 128 (on the 2-core CPU at 128, fp32: 14.3-15.6 ms copied, 13.0-13.7 not)
    python3 -m training export /tmp/model/model.pt /tmp/dmmha --gpu-dtype fp16 --static-step \
      --static-attention decoder-masked 2>&1 | quiet | tail -1
    for B in 1 128; do for W in "" --copy-windows; do
      PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/static_host.py /tmp/dmmha /tmp/model/test.tsv $B \
        --provider cuda $W 2>&1 | quiet | tail -2 | sed "s/^/decoder-masked $W: /" | tee -a "$OUT/static-host-b$B.txt"
    done; done
    # the same with the search's hypotheses always linked (session 38: sets of 56 or more keep arrays), for the
    # search's own time a step in the engine both ways
    PYTHONPATH=.:/tmp/site timeout 60 python3 bench/gpu_session/static_host.py /tmp/bundle /tmp/model/test.tsv 128 \
      --provider cuda --arrays-from 1000000000 2>&1 | quiet | tail -2 | tee -a "$OUT/static-host-b128.txt"
    # (session 38: hypotheses linked, a, against kept in arrays, b, the form sets of 56 or more now take; where the
    # two cost the same on this host's CPU says where ARRAYS_FROM belongs: 48-52 sentences on the 2-core CPU in
    # session 49)
    timeout 60 python3 -m bench search-cost --a . --a-arrays-from 1000000000 --b . --b-arrays-from 1 \
      --batch-sizes 1,32,48,64,128 --repeats 3 --out /tmp/search-cost 2>&1 | tail -6 | tee -a "$OUT/static-host-b128.txt"
    # and with the server's guard and length penalty on tokens that repeat as real ones do: where GUARDED_ARRAYS_FROM
    # belongs (36-40 sentences on the 2-core CPU in session 49, the line now 40)
    timeout 60 python3 -m bench search-cost --a . --a-arrays-from 1000000000 --b . --b-arrays-from 1 \
      --batch-sizes 32,40,48,128 --repeats 3 --no-repeat-ngram 3 --length-penalty 1.4 --pieces 400 \
      --out /tmp/search-cost-guard 2>&1 | tail -5 | tee -a "$OUT/static-host-b128.txt"
    # session 41: the dynamic fused fp16w graphs (a GPU server's default) stepping without attention rows where
    # nobody asks for them (the set's lean step, decoder_lean), against the same engine running the full step every
    # step; on the H200 in session 36 the lean graph alone ran 1.145x the full one at batch 1, 1.055x at 32
    # (session 43: and the same graphs stepping with their caches in place, the masked step, in the engine)
    timeout 170 python3 -m bench gpu --checkpoint /tmp/model/model.pt --input /tmp/model/test.tsv --beams 4 \
      --batch-sizes 1,128 --sentences 128 --repeats 2 \
      --systems cuda-fp16w-fused,cuda-fp16w-fused-full,cuda-fp16w-fused-masked \
      --out "$OUT/lean-step" 2>&1 | quiet | tail -12
    rm -f "$OUT"/lean-step.png
    [ -n "${NO_ORT:-}" ] || timeout 110 python3 -m bench ort-beam-search --checkpoint /tmp/model/model.pt --input /tmp/model/test.tsv \
      --provider cuda --threads 4 --batch-sizes 1,32 --sentences 64 --repeats 2 --out "$OUT/ort-beam-search" 2>&1 \
      | quiet | tail -8 ;;
  shipped)
    # Run 4 after batch1 (carry [".gpu/shipped"], the shipped models/en-de that stage.sh copies there; timeout_s
    # 200): `make serve`'s own bundle on the GPU, not one exported on the machine: its GPU set's graphs as the
    # server loads them (fp16w, fused attention, lean step), one client (a sentence alone) and 64 and 128
    . /tmp/gpu-env.sh
    timeout 180 python3 -m bench load --bundle .gpu/shipped --input /tmp/model/test.tsv --provider auto --threads 4 \
      --requests 1024 --warmup-requests 256 --deadline 15 --levels 1,64,128 --servers continuous \
      --out "$OUT/shipped-load" 2>&1 | quiet | tail -30
    rm -f "$OUT"/*.png ;;
  masked)
    # Run 5 after batch1 when time is left (nothing carried; timeout_s 200): the server's GPU defaults against the
    # same server stepping with its caches in place (MT_MASKED_STEP, session 43; targets exported /tmp/bundle with
    # --masked-step), at 1, 64 and 128 clients
    . /tmp/gpu-env.sh
    timeout 180 python3 -m bench load --bundle /tmp/bundle --input /tmp/model/test.tsv --provider auto --threads 4 \
      --requests 1024 --warmup-requests 256 --deadline 15 --levels 1,64,128 --servers continuous,continuous:masked-step \
      --out "$OUT/masked-load" 2>&1 | quiet | tail -30
    rm -f "$OUT"/*.png ;;
  measure-engine)
    setup || exit 3
    timeout 150 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/inference/test_cuda.py 2>&1 | tail -4 | tee "$OUT/pytest-gpu.txt"
    S=cuda-fp32,cuda-fp16w,cuda-fp16w-fused,cuda-fp16w-static,cuda-fp16w-fused-static,cuda-fp16w-static-nograph
    timeout 360 python3 -m bench gpu --checkpoint /tmp/model/model.pt --input /tmp/model/test.tsv --beams 4 \
      --batch-sizes 1,32,128 --sentences 128 --repeats 3 --systems $S,cuda-fp16-static --out "$OUT/en-de" 2>&1 | quiet
    python3 -m training export /tmp/model/model.pt /tmp/bundle --gpu-dtype fp16w --static-step 2>&1 | quiet | tail -1 ;;
  measure-more)
    . /tmp/gpu-env.sh
    S=cuda-fp32,cuda-fp16w,cuda-fp16w-static,cuda-fp16w-static-nograph
    [ -d /tmp/model/base-vocab ] && timeout 150 python3 -m bench gpu --random base --vocab /tmp/model/base-vocab \
      --input /tmp/model/test.tsv --beams 4 --batch-sizes 32,128 --max-length 28 --systems $S --out "$OUT/base-random" \
      2>&1 | quiet
    timeout 120 python3 -m bench attention --checkpoint /tmp/model/model.pt --input /tmp/model/test.tsv --provider cuda \
      --dtype fp16w --sentences 128 --batch-sizes 1,32,128 --repeats 3 --out "$OUT/attention" 2>&1 | quiet | tail -25
    timeout 60 python3 bench/gpu_session/placement.py /tmp/bundle --out "$OUT/placement.json" 2>&1 | tail -40
    timeout 200 python3 -m bench ort-beam-search --checkpoint /tmp/model/model.pt --input /tmp/model/test.tsv \
      --provider cuda --threads 4 --batch-sizes 1,32,128 --out "$OUT/ort-beam-search" 2>&1 | quiet
    # the search's own Python a step on this host's CPU (no GPU; printed, not a file: 8 files come back at most)
    timeout 90 python3 -m bench search-cost --batch-sizes 1,32,128 --repeats 3 --out /tmp/search-cost 2>&1 | tail -4
    # whether a sentence translates the same alone and in a batch on CUDA (float kernels may differ by batch size)
    timeout 120 python3 -m bench batch-mates --bundle /tmp/bundle --input /tmp/model/test.tsv --graphs cuda \
      --provider cuda --threads 4 --out /tmp/batch-mates 2>&1 | tail -3 ;;
  measure-server)
    . /tmp/gpu-env.sh
    L=(python3 -m bench load --bundle /tmp/bundle --input /tmp/model/test.tsv --provider auto --threads 4 --requests 1024 --deadline 15)
    timeout 330 "${L[@]}" --levels 1,16,64,128 --servers continuous,continuous:static-step,continuous:admit-every=4,batch \
      --out "$OUT/load" 2>&1 | quiet
    timeout 150 "${L[@]}" --mixed --levels 64 --servers continuous,continuous:static-step --out "$OUT/load-mixed" 2>&1 \
      | quiet | tail -30
    rm -f "$OUT"/*.png ;;
  profile-server)
    # After targets (nothing carried; timeout_s 150): where the server's threads spend their time under 128 clients
    # on the GPU (the GPU defaults: the engine in a process of its own). py-spy could not attach on session 42's
    # machine, so every Python process of the run samples its own threads (stack_dump/sitecustomize.py: every 5 ms,
    # from 35 s after the process starts, for 15 s: the server's and its engine process's samples fall in the
    # 128-client level). They come back in py-spy's raw form; read them again here with
    # python bench/gpu_session/stacks.py OUT/server-stacks.txt --under "_work (service/scheduler.py)"
    . /tmp/gpu-env.sh
    rm -rf /tmp/stacks && mkdir -p /tmp/stacks
    STACK_SAMPLES='/tmp/stacks/{pid}.txt' STACK_SAMPLES_DELAY=35 STACK_SAMPLES_FOR=15 \
      PYTHONPATH="$PWD/bench/gpu_session/stack_dump:$PYTHONPATH" timeout 110 python3 -m bench load --bundle /tmp/bundle \
      --input /tmp/model/test.tsv --provider auto --threads 4 --requests 20000 --warmup-requests 512 --deadline 60 \
      --levels 128 --servers continuous --out /tmp/profile-load 2>&1 | grep -E "clients:|raw engine"
    pkill -f "m service --host"; sleep 1
    cat /tmp/stacks/*.txt > "$OUT/server-stacks.txt"
    python3 bench/gpu_session/stacks.py "$OUT/server-stacks.txt" --top 60 | tee "$OUT/server-stacks-summary.txt" ;;
  *) echo "unknown step $step"; exit 2 ;;
esac
