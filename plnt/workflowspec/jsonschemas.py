"""The validators of the JSON Schemas a workflow spec carries, and where an error points.

A spec names schemas in several places (its inputs, a model step's `responseFormat`, a
tool's `parameters`, a smoke case's and a scorer's `jsonSchema`), and each is checked the
same way: by the draft the schema names in `$schema`, 2020-12 when it names none. One
function builds those validators, so a schema never means one thing at admission and
another at run time.

No errors of its own (jsonschema's `SchemaError` for a schema that is not one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema
import jsonschema.protocols
import jsonschema.validators

Validator = jsonschema.protocols.Validator


def validator_class(schema: dict[str, Any]) -> type[Validator]:
    """The validator class of the draft `schema` names (2020-12 when it names none)."""
    found: type[Validator] = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    return found


def validator(schema: dict[str, Any], *, formats: bool = False) -> Validator:
    """A validator of `schema`; `formats`: `format` keywords are checked too (the inputs a
    caller sends), not only annotations."""
    cls = validator_class(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER) if formats else cls(schema)


def json_path(parts: Sequence[str | int] | Any, *, root: str = "$") -> str:
    """`$.a[2].b` for a jsonschema error's path (`root` instead of `$` when given)."""
    return root + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)
