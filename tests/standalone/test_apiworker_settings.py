"""What `plnt up` hands a worker child: its `ServerSettings` as JSON (never pickle), read
back equal, and the in-flight limits each of N workers admits."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.apiserver.settings import CatalogSettings, ServerSettings, ServingLimits
from plnt.standalone import apiprocess


def test_settings_survive_the_json_file(tmp_path: Path) -> None:
    settings = apiprocess.ApiProcessSettings(
        server=ServerSettings(
            etcd_endpoints=("127.0.0.1:2379", "127.0.0.1:2380"),
            port=7443,
            pki_dir=tmp_path / "pki",
            token_file=tmp_path / "tokens.csv",
            policy_file=None,
            limits=ServingLimits(max_requests_inflight=7, invoke_timeout_seconds=9.5),
            catalog=CatalogSettings(
                default_sources=("oci-layout:*",), layout_root=tmp_path / "layouts"
            ),
        ),
        temporal_address="127.0.0.1:7233",
        temporal_namespace="plnt",
    )
    path = tmp_path / "settings.json"
    apiprocess.write(path, settings)
    assert path.stat().st_mode & 0o777 == 0o600
    assert apiprocess.read(path) == settings


@pytest.mark.parametrize(
    ("limit", "count", "share"), [(200, 2, 100), (2, 2, 1), (5, 2, 3), (1, 8, 1), (0, 4, 0)]
)
def test_each_worker_admits_its_share_rounded_up(limit: int, count: int, share: int) -> None:
    limits = ServingLimits(max_requests_inflight=limit, max_mutating_requests_inflight=limit)
    shared = limits.per_process(count)
    assert (shared.max_requests_inflight, shared.max_mutating_requests_inflight) == (share, share)
    assert shared.invoke_timeout_seconds == limits.invoke_timeout_seconds
    assert limits.per_process(1) == limits
