# syntax=docker/dockerfile:1
#
# Images of the translation service (and of the trainer). See docs/deploy.md.
#
#   GPU (default):  docker build -t transformer-mt:gpu .
#   CPU only:       docker build -t transformer-mt:cpu --build-arg BASE=python:3.11-slim-bookworm .
#   trainer:        docker build -t transformer-mt:trainer --target trainer .
#
# BASE is used by every stage, so the venv built in `builder` runs on the very same Python in
# `runtime`. The default is a CUDA 13 + cuDNN 9 runtime (what onnxruntime-gpu's CUDA provider needs);
# a base without python3 gets the distribution's python3 (Ubuntu 24.04: 3.12). With a python:* image,
# its own Python is used. The serving image never contains torch: it installs `pip install .`, the
# serving dependencies only, exactly like `make install-serve` (tests/deploy/test_container_files.py checks).
ARG BASE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04

# ---------------------------------------------------------------------------------------------------
FROM ${BASE} AS base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Package versions follow whichever distribution BASE is, so they cannot be pinned here.
# hadolint ignore=DL3008
RUN if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && groupadd --system --gid 10001 mt \
    && useradd --system --uid 10001 --gid mt --no-create-home --shell /usr/sbin/nologin mt
WORKDIR /app

# ---------------------------------------------------------------------------------------------------
FROM base AS builder
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml ./
COPY core ./core
COPY inference ./inference
COPY service ./service
COPY training ./training
# Serving dependencies only (no extras): the same spec as `make install-serve`.
RUN pip install --no-cache-dir .

# ---------------------------------------------------------------------------------------------------
# Trainer: training extras (torch==2.13.0, onnx, sacrebleu, ...). From PyPI that is a CUDA build of
# torch; for a CPU trainer pass --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# (pip then prefers 2.13.0+cpu). It writes bundles into /app/models, a volume the translator shares.
FROM base AS trainer
ARG TORCH_INDEX_URL=""
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml ./
COPY core ./core
COPY inference ./inference
COPY service ./service
COPY training ./training
# The project itself with its extras: versions are pinned in pyproject.toml, not here.
# hadolint ignore=DL3013
RUN if [ -n "${TORCH_INDEX_URL}" ]; then export PIP_EXTRA_INDEX_URL="${TORCH_INDEX_URL}"; fi \
    && pip install --no-cache-dir '.[train]' \
    && mkdir -p /app/data /app/runs \
    && chown 10001:10001 /app/data /app/runs
COPY --chown=10001:10001 models/ /app/models/
USER 10001:10001
ENTRYPOINT ["python", "-m", "training"]
CMD ["--help"]

# ---------------------------------------------------------------------------------------------------
# Runtime (the default target): the service, its venv and the model bundles; runs as a non-root user.
FROM base AS runtime
COPY --from=builder /opt/venv /opt/venv
COPY --chown=10001:10001 models/ /app/models/
ENV PATH=/opt/venv/bin:$PATH \
    MT_BUNDLES=/app/models/en-de,/app/models/de-en \
    MT_HOST=0.0.0.0 \
    MT_PORT=8000 \
    MT_PROVIDER=auto \
    MT_LOG_LEVEL=info
USER 10001:10001
EXPOSE 8000
# /readyz answers 200 only once the model is loaded and warmed up; urllib raises (exit 1) otherwise.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('MT_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["python", "-m", "service"]
