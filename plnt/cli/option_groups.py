"""Options several commands share, declared once as a frozen dataclass.

A group's fields carry their typer options (`Annotated[..., typer.Option(...)]`);
`takes(param, Group)` lets a command accept `param: Group` while typer sees each field
as its own `--option`. Two commands that take the same group cannot drift apart: a new
option, default or help text is one new field.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any


def _parameters(group: type[Any]) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=hints[field.name],
            default=field.default,
        )
        for field in dataclasses.fields(group)
    ]


def takes(param: str, group: type[Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator: `command(..., <param>: group)` as typer sees it, one `--option` per field."""
    names = [field.name for field in dataclasses.fields(group)]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != param]

        @functools.wraps(command)
        def wrapper(**values: Any) -> None:
            options = group(**{name: values.pop(name) for name in names})
            command(**values, **{param: options})

        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*kept, *_parameters(group)]
        )
        return wrapper

    return decorate
