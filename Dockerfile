# The plnt image: one image for every plnt process.
#
#   plnt serve    the aggregated API server (the default command)
#   plnt worker   the deploy saga's Temporal worker
#   plnt runner   a workflow runner
#
# Build: docker build -t ghcr.io/plnt-work/plnt:0.1.0 .
# The base image is pinned by tag; pin it by digest too in your own builds
# (python:3.11.13-slim-bookworm@sha256:...) for reproducible images.
#
# Offline builds: wheels in wheelhouse/ (`make image` fills it on the host) make every
# pip below install from them alone (--no-index), so the build needs no network. With
# wheelhouse/ holding no wheels, as in a fresh checkout, pip installs from PyPI.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# Stage 1: build the wheel from the source tree.
# `build` gets a virtual environment of its own, so nothing is installed into the
# system Python. PIP_NO_INDEX and PIP_FIND_LINKS also reach the pip that `build` runs
# to install the build backend (setuptools) in its isolated environment.
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY wheelhouse/ /wheelhouse/
RUN if ls /wheelhouse/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse; fi \
 && python3 -m venv /opt/build \
 && /opt/build/bin/pip install --no-cache-dir "build==1.2.2.post1"
COPY pyproject.toml README.md ./
COPY plnt ./plnt
RUN if ls /wheelhouse/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse; fi \
 && /opt/build/bin/python -m build --wheel --outdir /dist

# Stage 2: install the wheel and its dependencies into a virtual environment.
# The venv lives at the same path in the final stage, so its scripts' shebangs
# stay valid.
FROM ${PYTHON_IMAGE} AS venv
RUN python3 -m venv /opt/plnt
COPY wheelhouse/ /wheelhouse/
COPY --from=wheel /dist/ /dist/
RUN if ls /wheelhouse/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse; fi \
 && /opt/plnt/bin/pip install --no-cache-dir /dist/*.whl \
 && /opt/plnt/bin/plnt --help >/dev/null

# Stage 3: the runtime image, without build tools or the source tree.
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="plnt" \
      org.opencontainers.image.description="plnt: an aggregated Kubernetes API server for AI workflows" \
      org.opencontainers.image.source="https://github.com/plnt-work/plnt" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=venv /opt/plnt /opt/plnt
# The Helm chart mounts a read-only root filesystem: nothing writes bytecode,
# and HOME points at /tmp, which the chart mounts as an emptyDir.
ENV PATH=/opt/plnt/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
# A numeric non-root user (the distroless "nonroot" uid), so runAsNonRoot can
# verify it without a passwd entry.
USER 65532:65532
WORKDIR /tmp
EXPOSE 6443
ENTRYPOINT ["plnt"]
CMD ["serve"]
