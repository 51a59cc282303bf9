"""The step cache: content-addressed keys, LRU bound, TTL (on a fake clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.runner import settings, step_cache


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def key(**overrides: object) -> str:
    parts: dict[str, object] = {
        "step": {"id": "a"},
        "resolved": {"messages": ["x"]},
        "backend": "echo:",
        "model": "m",
    }
    parts.update(overrides)
    return step_cache.cache_key(**parts)  # type: ignore[arg-type]


def test_keys_change_with_each_part_and_ignore_dict_order() -> None:
    base = key()
    assert key(resolved={"messages": ["y"]}) != base
    assert key(model="n") != base
    assert key(backend="openai:http://h") != base
    assert key(step={"id": "a", "retries": 1}) != base
    assert step_cache.cache_key(step={"b": 1, "a": 2}, resolved=0, backend="", model=None) == (
        step_cache.cache_key(step={"a": 2, "b": 1}, resolved=0, backend="", model=None)
    )


def test_least_recently_used_entries_are_evicted_beyond_the_bound() -> None:
    cache = step_cache.StepCache(max_entries=2, ttl_seconds=60)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == (True, 1)  # a is now more recent than b
    cache.put("c", 3)
    assert cache.get("b") == (False, None)
    assert cache.get("a") == (True, 1) and cache.get("c") == (True, 3)
    assert (cache.hits, cache.misses, len(cache)) == (3, 1, 2)


def test_entries_expire_after_the_ttl() -> None:
    clock = FakeClock()
    cache = step_cache.StepCache(max_entries=8, ttl_seconds=10, clock=clock)
    cache.put("a", 1)
    clock.now += 9.9
    assert cache.get("a") == (True, 1)
    clock.now += 0.1
    assert cache.get("a") == (False, None)
    assert len(cache) == 0


def test_backend_config_loads_from_yaml_and_reads_the_key_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "backend.yaml"
    path.write_text("type: vllm\nendpoint: http://h:8000/v1\nmodel: m\napiKeyEnv: TEST_KEY\n")
    monkeypatch.setenv("TEST_KEY", "sekret")
    config = settings.load_backend_config(path)
    assert config.resolved_api_key() == "sekret"
    assert "sekret" not in config.identity()
    path.write_text("type: vllm\n")
    with pytest.raises(settings.BackendConfigError, match="needs an endpoint"):
        settings.load_backend_config(path)


def test_the_api_key_comes_from_the_env_then_the_key_file_then_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "token"
    key_file.write_text("from-file\n")
    config = settings.BackendConfig(
        type="openai",
        endpoint="http://h/v1",
        api_key_env="TEST_KEY",
        api_key_file=str(key_file),
        api_key="inline",
    )
    monkeypatch.setenv("TEST_KEY", "from-env")
    assert config.resolved_api_key() == "from-env"
    monkeypatch.delenv("TEST_KEY")
    assert config.resolved_api_key() == "from-file"
    assert config.model_copy(update={"api_key_file": None}).resolved_api_key() == "inline"
    key_file.unlink()
    with pytest.raises(settings.BackendConfigError, match=f"apiKeyFile {key_file}"):
        config.resolved_api_key()
