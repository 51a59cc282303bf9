"""The base of every wire model: camelCase on the wire, unknown fields refused.

`extra="forbid"` is what makes schema validation name unknown fields; the
registry decides per request (fieldValidation) whether that is an error, a
warning, or ignored, before the model ever sees the data.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A JSON object as Kubernetes clients send and expect it."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """Serialise with camelCase names, leaving out unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
