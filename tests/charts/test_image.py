"""The Dockerfile the chart's image is built from, read as text. The tests build no image
(no Docker engine runs here); `.ci/image` builds it offline with podman and starts
`plnt serve`, `plnt worker` and `plnt up` in it."""

from __future__ import annotations

import re
import tomllib

import helm_python

from tests.charts import rendering

DOCKERFILE = (rendering.REPO / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    return re.findall(rf"^{name}\s+(.+)$", DOCKERFILE, flags=re.MULTILINE)


def stages() -> list[list[str]]:
    """Each stage's instructions, continuation lines joined and comments dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", DOCKERFILE)
    found: list[list[str]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            found.append([])
        if found:
            found[-1].append(line)
    return found


OFFLINE_SWITCH = (
    "if ls /wheelhouse/*.whl >/dev/null 2>&1; "
    "then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse; fi"
)


def named_stages() -> dict[str, list[str]]:
    """Each named stage's instructions, by its `AS` name (the last, unnamed one as "")."""
    named: dict[str, list[str]] = {}
    for stage in stages():
        match = re.match(r"FROM \S+(?: AS (\S+))?$", stage[0])
        assert match, stage[0]
        named[match.group(1) or ""] = stage
    return named


def test_image_runs_plnt_serve_by_default_as_the_charts_non_root_uid() -> None:
    named = named_stages()
    assert named[""] == ["FROM cluster"]  # the default target is the image a cluster pulls
    cluster = named["cluster"]
    assert 'ENTRYPOINT ["plnt"]' in cluster and 'CMD ["serve"]' in cluster
    assert "USER 65532:65532" in cluster
    # The standalone image is the cluster image and `plnt up`'s three binaries.
    assert named["standalone"][0] == "FROM ${CLUSTER_IMAGE} AS standalone"
    assert 'CMD ["up"]' in named["standalone"]
    assert re.findall(r"^ARG CLUSTER_IMAGE=(\S+)$", DOCKERFILE, flags=re.MULTILINE) == ["cluster"]


def test_every_stage_starts_from_the_pinned_python_311_slim_image() -> None:
    (pinned,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, flags=re.MULTILINE)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", pinned)
    named = named_stages()
    for name, stage in named.items():
        base = stage[0].split()[1]
        if name == "cluster":  # the pinned base, cut down, copied whole as one layer
            assert base == "scratch" and "COPY --from=runtime-base / /" in stage
        elif name in ("standalone", ""):
            assert base in ("${CLUSTER_IMAGE}", "cluster")
        else:
            assert base == "${PYTHON_IMAGE}", stage[0]


def test_build_context_keeps_what_the_wheel_needs_and_drops_the_rest() -> None:
    lines = (rendering.REPO / ".dockerignore").read_text().splitlines()
    ignored = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for needed in ("pyproject.toml", "README.md", "plnt"):
        assert needed not in ignored
    for dropped in (".git", ".venv", "tests", "charts"):
        assert dropped in ignored
    copied = instructions("COPY")
    assert "pyproject.toml README.md ./" in copied and "plnt ./plnt" in copied


def test_build_stages_install_only_from_the_wheelhouse_when_it_holds_wheels() -> None:
    """`.ci/image` builds with `--network none` from a host-built wheelhouse; a plain
    `docker build .` (no wheels in wheelhouse/) installs from PyPI."""
    named = named_stages()
    installing = [
        stage
        for stage in named.values()
        if any(re.search(r"\bpip install\b|-m build\b", line) for line in stage)
    ]
    assert len(installing) >= 3  # the wheel, the venv, the standalone binaries
    for stage in installing:
        assert "COPY wheelhouse/ /wheelhouse/" in stage
        pip_runs = [line for line in stage if re.search(r"\bpip install\b|-m build\b", line)]
        for run in pip_runs:
            assert run.startswith(f"RUN {OFFLINE_SWITCH} && "), run
            # Into a virtual environment, never the system Python (PEP 668 refuses it).
            assert re.search(r"/opt/\w+/bin/(pip|python) ", run), run
    for shipped in ("runtime-base", "cluster", "standalone", ""):
        assert not any("wheelhouse" in line for line in named[shipped]), shipped
    assert "COPY --from=venv /opt/plnt /opt/plnt" in named["runtime-base"]
    # .ci/image wheels the same `build` the first stage installs.
    assert re.findall(r'"build==[^"]+"', DOCKERFILE) == ['"build==1.2.2.post1"']


def test_wheelhouse_is_in_the_build_context_and_its_wheels_are_not_in_git() -> None:
    assert (rendering.REPO / "wheelhouse" / "README.md").is_file()
    lines = (rendering.REPO / ".dockerignore").read_text().splitlines()
    assert not any(line.strip().startswith("wheelhouse") for line in lines)
    assert "/wheelhouse/*.whl" in (rendering.REPO / ".gitignore").read_text().splitlines()


def test_chart_app_version_is_the_package_version(chart: helm_python.Chart) -> None:
    project = tomllib.loads((rendering.REPO / "pyproject.toml").read_text())["project"]
    assert chart.metadata["appVersion"] == project["version"]
