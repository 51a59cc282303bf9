"""The kubelet simulator's container runtime: a container is a real local process.

An image is not pulled or unpacked: `Images` maps an image's repository name to its
entrypoint and default arguments (the plnt image: `ENTRYPOINT ["plnt"]`, `CMD
["serve"]`). A command `plnt ...` runs as `sys.executable -m plnt ...` (and `python` as
`sys.executable`), so any plnt subcommand runs from the code under test. Listening flags
are rewritten so each replica binds 127.0.0.1 on a port of its own: `plnt runner` gets
`--host 127.0.0.1 --port 0` and its real port is read from the line it prints when
listening; `plnt serve` gets `--bind-address 127.0.0.1 --secure-port <free port>`. Every
declared containerPort of the container maps to that real port.

Volumes are materialised under a per-pod root: configMap and secret volumes (all keys, or
`items`) as files, emptyDir as an empty directory. Mount paths are not bind-mounted; an
argument or env value that starts with a mount path is rewritten to the materialised
directory. Env takes `value` (with `$(VAR)` expansion), `valueFrom` (configMapKeyRef,
secretKeyRef, fieldRef) and `envFrom`. Output goes to one log file per start; the
termination message of a failed start is the tail of that log (as with
`terminationMessagePolicy: FallbackToLogsOnError`). A process runs in its own session
and is stopped with SIGTERM, then SIGKILL, to the whole group.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plnt.processes.ports import free_port

Obj = dict[str, Any]
LOG_TAIL_BYTES = 2048
LOG_TAIL_LINES = 80
_LISTENING = re.compile(rb"listening on https?://[^\s:]+:(\d+)")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
# plnt subcommand -> (port flag, host flag, prints the port it got when given 0)
LISTEN_FLAGS = {
    "runner": ("--port", "--host", True),
    "serve": ("--secure-port", "--bind-address", False),
}


class ContainerError(Exception):
    """A container cannot be created (its message becomes `CreateContainerError`)."""


class MountError(Exception):
    """A volume's source is missing (the pod stays `ContainerCreating`)."""


@dataclass
class Images:
    """What the simulator knows of images, and which pulls fail."""

    entrypoints: dict[str, tuple[list[str], list[str]]] = field(
        default_factory=lambda: {"plnt": (["plnt"], ["serve"])}
    )
    failing: set[str] = field(default_factory=set)

    def entrypoint(self, image: str) -> tuple[list[str], list[str]] | None:
        repository = image.split("@", 1)[0].rpartition("/")[2].split(":", 1)[0]
        return self.entrypoints.get(repository)


def _strip_flag(args: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out


def expand(text: str, env: dict[str, str]) -> str:
    """kube's `$(VAR)` expansion; `$$` escapes; unknown references stay as written."""
    parts = text.split("$$")
    return "$".join(_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), p) for p in parts)


def command_line(container: Obj, images: Images) -> tuple[list[str], int | None]:
    """argv with the entrypoint translated and listening flags rewritten, and the port
    chosen for it (None: none, or the process prints the one it got)."""
    command = list(container.get("command") or [])
    args = list(container.get("args") or [])
    if not command:
        known = images.entrypoint(str(container.get("image", "")))
        if known is None:
            raise ContainerError(
                f"the stand-in knows no entrypoint for image {container.get('image')!r}; "
                "give the container a command"
            )
        command = list(known[0])
        args = args or list(known[1])
    argv = command + args
    if argv[0] == "plnt":
        argv = [sys.executable, "-m", "plnt", *argv[1:]]
    elif argv[0] in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]
    is_plnt = argv[1:3] == ["-m", "plnt"]
    subcommand = argv[3] if is_plnt and len(argv) > 3 else ""
    if subcommand not in LISTEN_FLAGS:
        return argv, None
    port_flag, host_flag, prints = LISTEN_FLAGS[subcommand]
    argv = _strip_flag(_strip_flag(argv, port_flag), host_flag)
    port = None if prints else free_port()
    argv += [host_flag, "127.0.0.1", port_flag, str(0 if port is None else port)]
    return argv, port


def materialise(pod: Obj, root: Path, lookup: Callable[[str, str], Obj | None]) -> dict[str, Path]:
    """Write the pod's volumes under `root`; mount path -> local directory or file."""
    volumes: dict[str, Path] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        target = root / "volumes" / volume["name"]
        target.mkdir(parents=True, exist_ok=True)
        source, data = None, {}
        if "configMap" in volume:
            source = volume["configMap"]
            found = lookup("configmaps", source.get("name", ""))
            if found is None and not source.get("optional"):
                raise MountError(f'configmap "{source.get("name")}" not found')
            found = found or {}
            data = {k: v.encode() for k, v in (found.get("data") or {}).items()}
            data |= {k: base64.b64decode(v) for k, v in (found.get("binaryData") or {}).items()}
        elif "secret" in volume:
            source = volume["secret"]
            found = lookup("secrets", source.get("secretName", ""))
            if found is None and not source.get("optional"):
                raise MountError(f'secret "{source.get("secretName")}" not found')
            data = {k: base64.b64decode(v) for k, v in ((found or {}).get("data") or {}).items()}
        items = (source or {}).get("items")
        for key, value in data.items():
            paths = [i["path"] for i in items or [] if i["key"] == key] if items else [key]
            for relative in paths:
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                (target / relative).write_bytes(value)
        volumes[volume["name"]] = target
    mounts: dict[str, Path] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            local = volumes.get(mount["name"])
            if local is not None:
                mounts[mount["mountPath"].rstrip("/")] = local / mount.get("subPath", "")
    return mounts


def rewrite_paths(text: str, mounts: dict[str, Path]) -> str:
    for mount_path in sorted(mounts, key=len, reverse=True):
        local = str(mounts[mount_path]).rstrip("/")
        for prefix in ("", "="):
            marker = prefix + mount_path
            index = text.find(marker)
            if index < 0 or (prefix == "" and index != 0):
                continue
            end = index + len(marker)
            if end == len(text) or text[end] == "/":
                return text[: index + len(prefix)] + local + text[end:]
    return text


def environment(
    container: Obj, pod: Obj, lookup: Callable[[str, str], Obj | None], mounts: dict[str, Path]
) -> dict[str, str]:
    base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env: dict[str, str] = {**base, "HOSTNAME": pod["metadata"]["name"]}
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef") or source.get("secretRef") or {}
        found = lookup("configmaps" if "configMapRef" in source else "secrets", ref.get("name", ""))
        values = dict((found or {}).get("data") or {})
        if "secretRef" in source:
            values = {k: base64.b64decode(v).decode() for k, v in values.items()}
        env |= {source.get("prefix", "") + k: v for k, v in values.items()}
    fields = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "metadata.uid": pod["metadata"].get("uid", ""),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName", ""),
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    for variable in container.get("env") or []:
        name, value = variable["name"], variable.get("value")
        source = variable.get("valueFrom") or {}
        if value is not None:
            value = expand(value, env)
        elif "fieldRef" in source:
            value = fields.get(source["fieldRef"]["fieldPath"], "")
        elif "configMapKeyRef" in source or "secretKeyRef" in source:
            ref = source.get("configMapKeyRef") or source.get("secretKeyRef")
            found = lookup("configmaps" if "configMapKeyRef" in source else "secrets", ref["name"])
            raw = ((found or {}).get("data") or {}).get(ref["key"])
            if raw is not None and "secretKeyRef" in source:
                raw = base64.b64decode(raw).decode()
            value = raw
        if value is not None:
            env[name] = rewrite_paths(value, mounts)
    return env


@dataclass
class Process:
    """One start of one container."""

    process: asyncio.subprocess.Process
    log: Path
    port: int | None

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    def discover_port(self) -> int | None:
        if self.port is None:
            with contextlib.suppress(OSError):
                found = _LISTENING.search(self.log.read_bytes())
                if found:
                    self.port = int(found.group(1))
        return self.port

    def tail(self) -> str:
        try:
            data = self.log.read_bytes()[-LOG_TAIL_BYTES:]
        except OSError:
            return ""
        return "\n".join(data.decode(errors="replace").splitlines()[-LOG_TAIL_LINES:])

    async def stop(self, grace: float) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
        await self.process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # anything the process left behind


async def start(
    argv: list[str], env: dict[str, str], cwd: Path, log: Path, port: int | None
) -> Process:
    log.parent.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240
    with open(log, "wb") as output:  # noqa: ASYNC230 (the child writes to it, not this loop)
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=output,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    return Process(process, log, port)
