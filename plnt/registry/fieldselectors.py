"""Field selectors, parsed and matched exactly as k8s.io/apimachinery's `pkg/fields` does.

`kubectl describe` sends `involvedObject.name=a\\,b`-style terms in random
order, and clients match on the exact error ``field label not supported:
<field>``; values escape `\\`, `,` and `=` with a backslash, and a missing field
compares equal to the empty string. Errors are `selectors.SelectorError`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from plnt.registry.labelnames import go_quote
from plnt.registry.selectors import SelectorError


@dataclass(frozen=True)
class FieldRequirement:
    """One `field=value` or `field!=value` term (`==` is stored as `=`)."""

    field: str
    operator: str
    value: str

    def __post_init__(self) -> None:
        if self.operator not in ("=", "!="):
            raise SelectorError(
                f"invalid field requirement operator {go_quote(self.operator)}: "
                'supported values: "=", "!="'
            )

    def matches(self, fields: Mapping[str, str]) -> bool:
        """kube's hasTerm/notHasTerm: a missing field compares as the empty string."""
        equal = fields.get(self.field, "") == self.value
        return equal if self.operator == "=" else not equal

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field requirements; no requirements selects everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether every requirement holds for `fields`."""
        return all(requirement.matches(fields) for requirement in self.requirements)

    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements

    def requires_exact_match(self, field: str) -> str | None:
        """The value of the first `field=` term (fields.Selector.RequiresExactMatch)."""
        for requirement in self.requirements:
            if requirement.field == field and requirement.operator == "=":
                return requirement.value
        return None

    def single_name(self) -> str | None:
        """The object name a `metadata.name=` term pins, as kube's request info derives it.

        kube-apiserver uses it as the name in authorization and watches of one object
        (`kubectl get x -w`); like `path.IsValidPathSegmentName` it ignores names that
        could not be a URL path segment.
        """
        name = self.requires_exact_match("metadata.name")
        if name is None or name in (".", "..") or "/" in name or "%" in name:
            return None
        return name

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def escape_field_value(value: str) -> str:
    """fields.EscapeValue: backslash-escape `\\`, `,` and `=`."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_terms(text: str) -> list[str]:
    """Split on commas not preceded by an escaping backslash; escapes stay in the terms."""
    terms: list[str] = []
    start, escaped = 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """Split at the first operator; the field name admits no escapes."""
    for index in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def _unescape(selector: str, value: str) -> str:
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(
                    f"invalid field selector {go_quote(selector)}: "
                    f"invalid escape sequence: \\{char}"
                )
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(
                f"invalid field selector {go_quote(selector)}: "
                f"unescaped character in value: {char!r}"
            )
        else:
            out.append(char)
    if escaped:
        raise SelectorError(
            f"invalid field selector {go_quote(selector)}: invalid escape sequence: \\"
        )
    return "".join(out)


def parse_field_selector(text: str, *, allowed: Collection[str] | None) -> FieldSelector:
    """Parse a `fieldSelector` query value, refusing fields outside `allowed`.

    `allowed=None` checks no field: request classification reads the name before
    it knows the resource, as kube's request info does.

    As in apimachinery the terms are sorted, empty terms are skipped, `==` means `=`,
    and the field check runs after the whole text has parsed.
    """
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_terms(text)) if text else []:
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, raw = split
        value = _unescape(text, raw)
        requirements.append(FieldRequirement(field, "!=" if operator == "!=" else "=", value))
    for requirement in requirements:
        if allowed is not None and requirement.field not in allowed:
            raise SelectorError(f"field label not supported: {requirement.field}")
    return FieldSelector(tuple(requirements))
