#!/usr/bin/env bash
# Stage a GPU measurement session (run here, from the project root, after `make install`). Everything goes
# to .gpu/ (ignored by git). What worked on 2026-11-25 (docs/inference-core.md, "Measured on an H100"):
#   bash bench/gpu_session/stage.sh [CHECKPOINT]     (default: the weights of the shipped models/en-de)
#   bash bench/gpu_session/stage.sh hide             the two bundles (102 MB) out of what a device run carries
# then, with the device tool, back to back (the machine goes back after 30 s idle). With 15 minutes of device
# time (the machine's start included), the two first runs:
#   run 1: bash bench/gpu_session/device.sh part 1           carry [".gpu/p1"]
#   run 2: bash bench/gpu_session/device.sh targets          carry [".gpu/p2", ".gpu/whl", ".gpu/model"], timeout_s 590
#   run 3: NO_ORT=1 bash bench/gpu_session/device.sh batch1  (nothing carried: /tmp holds what run 2 set up),
#          timeout_s 240 (NO_ORT skips onnxruntime's BeamSearch operator, measured in sessions 25 and 36)
#   run 4: bash bench/gpu_session/device.sh shipped   carry [".gpu/shipped"] (the shipped models/en-de), timeout_s 200
#   run 5, with 4 minutes left: bash bench/gpu_session/device.sh profile-server   (nothing carried), timeout_s 150
#     (where the server's threads spend their time: each process samples its own, stack_dump/sitecustomize.py,
#     since py-spy could not attach on session 42's H100).
#     Session 36 on an H200: the machine's start with run 1 took 58 s, targets 336 s and batch1 29 s, 440 s of the
#     900 with the transfers. Session 42 on an H100 (run 1 named kind nvidia-h100-x1: the issue's targets are an
#     H100's, and status offered an H200): start and run 1 73 s, targets 411 s, batch1 (NO_ORT, with the lean step)
#     90 s, shipped 75 s, 677 s held in all; session 42 then added two admission.py runs to batch1 (~30 s).
# and with more time, instead of run 2:
#   run 2: bash bench/gpu_session/device.sh measure-engine   carry [".gpu/p2", ".gpu/whl", ".gpu/model"]
#   run 3: bash bench/gpu_session/device.sh measure-more     (nothing carried: /tmp holds what run 2 set up)
#   run 4: bash bench/gpu_session/device.sh measure-server   (the same)
# and finally here: bash bench/gpu_session/stage.sh unhide
# then, the reports copied to docs/reports/gpu/<machine>-<date>/, what they decide (targets met, opt-in cuts against
# the defaults, the run against session 42's H100):
#   python bench/gpu_session/decide.py DIR --baseline docs/reports/gpu/h100-2026-11-27 --out DIR/decide.md
set -euo pipefail
G=.gpu
case "${1:-}" in
  hide)
    git rm -r -q --cached models/en-de models/de-en
    printf '/models/en-de/\n/models/de-en/\n' >> .git/info/exclude
    echo "bundles hidden from device runs: run 'bash bench/gpu_session/stage.sh unhide' before committing"
    exit 0 ;;
  unhide)
    git reset -q models/en-de models/de-en
    sed -i '/^\/models\/en-de\/$/d; /^\/models\/de-en\/$/d' .git/info/exclude
    echo "bundles tracked again"; exit 0 ;;
esac
CKPT=${1:-}
PY=.venv/bin/python
ORT=${ORT_VERSION:-1.31.1}
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
mkdir -p "$G/dl" "$G/whl" "$G/model"
rm -rf "$G/shipped" && cp -r models/en-de "$G/shipped"  # make serve's own bundle, for device.sh shipped
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
WHEEL=$G/dl/onnxruntime_gpu-$ORT-cp312-cp312-manylinux_2_28_x86_64.whl
[ -f "$WHEEL" ] || python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$G/dl" "onnxruntime-gpu==$ORT"
[ -f "$G/dl/ort.tar.xz" ] || $PY bench/gpu_session/thin_wheel.py "$WHEEL" "$G/dl/ort.tar.xz"
# What the GPU image lacks for the server and the CLI, at the versions of .venv.
pins=$($PY - <<'PY'
import importlib.metadata as m
names = ["fastapi", "fastapi-offline", "starlette", "pydantic", "pydantic-core", "pydantic-settings", "python-dotenv",
         "uvicorn", "annotated-types", "annotated-doc", "typing-inspection", "typing-extensions", "httptools",
         "pysbd", "opentelemetry-api", "polib", "tqdm", "py-spy"]
pins = []
for name in names:
    try:
        pins.append(f"{name}=={m.version(name)}")
    except m.PackageNotFoundError:
        pass
print(" ".join(pins))
PY
)
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$G/whl" $pins 2>&1 | grep -v '^WARNING' || true
# The model: its weights rounded to fp16 (half the size; fp32, fp16 and fp16w graphs exported from it then hold
# the same weights), the test sentences, and a 16k vocabulary for the untrained base preset. On a fresh clone
# (no runs/, no data/) the weights are the shipped bundle's, read back from its GPU set (import-bundle --graphs
# cuda: its fp16 weights), and the sentences are Python's own documentation (bench/loadtools.py stdlib_sentences).
if [ -z "$CKPT" ] || [ ! -f "$CKPT" ]; then
  [ -z "$CKPT" ] || echo "$CKPT is missing: importing the weights of models/en-de instead"
  CKPT=$G/dl/imported.pt  # read again every time: the shipped model changes
  $PY -m training import-bundle models/en-de "$CKPT" --graphs cuda > /dev/null
fi
$PY - "$CKPT" "$G/model/model.pt" <<'PY'
import sys, torch
payload = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
payload["model"] = {k: v.half() if v.is_floating_point() else v for k, v in payload["model"].items()}
torch.save(payload, sys.argv[2])
PY
DATA=${DATA:-data/en-de}  # the corpus: its test sentences and, for the base preset, a 16k vocabulary
[ -f "$DATA/test.tsv" ] || [ ! -f data/en-de-next/test.tsv ] || DATA=data/en-de-next
if compgen -G "$DATA/test.*.tsv" > /dev/null; then
  # the test sets by domain, one sentence of each in turn (session 36): the first 128 hold every domain alike
  $PY -c "import glob, itertools, sys; files = [open(f, encoding='utf-8').read().splitlines() for f in sorted(glob.glob(sys.argv[1] + '/test.*.tsv'))]; print('\n'.join(line for group in itertools.zip_longest(*files) for line in group if line))" "$DATA" > "$G/model/test.tsv"
elif [ -f "$DATA/test.tsv" ]; then
  cp "$DATA/test.tsv" "$G/model/test.tsv"
else
  $PY -c "from bench.loadtools import stdlib_sentences; print('\n'.join(stdlib_sentences(400)))" > "$G/model/test.tsv"
fi
if [ -f "$DATA/train.tsv" ]; then
  [ -f "$G/model/base-vocab/spm.model" ] || $PY -m training vocab "$DATA/train.tsv" --out "$G/model/base-vocab" --size 16000
else
  echo "no $DATA/train.tsv: no 16k vocabulary, so measure-more skips the base preset"
fi
# Parts: what travels with every run anyway is the working tree (hide the bundles first).
tree_kib=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)
[ "$tree_kib" -lt 20000 ] || { echo "the working tree is $((tree_kib / 1024)) MiB: run '$0 hide' first"; exit 1; }
rm -rf "$G/p1" "$G/p2"; mkdir -p "$G/p1" "$G/p2"
split -b "$(( 60 - tree_kib / 1024 ))M" -d -a 1 "$G/dl/ort.tar.xz" "$G/dl/chunk."
mv "$G/dl/chunk.0" "$G/p1/"; cat "$G"/dl/chunk.* > "$G/p2/chunk.1" 2>/dev/null; rm -f "$G"/dl/chunk.*
sha256sum "$G/dl/ort.tar.xz" | cut -d' ' -f1 > "$G/p2/sha"
du -sh "$G/p1" "$G/p2" "$G/whl" "$G/model"
echo "staged; next: the three device runs in this script's header"
