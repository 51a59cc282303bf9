"""Field and label selectors as k8s.io/apimachinery parses them (equality terms only).

Field selector terms are `key=value`, `key==value` or `key!=value`, comma separated;
`\\`, `,` and `=` in values are escaped with a backslash (`fields.EscapeValue`), and
kubectl describe builds its selector from a Go map, so term order is arbitrary. Label
selectors support the equality forms and bare `key` / `!key` existence. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tests.support.kube import statuses


@dataclass(frozen=True, slots=True)
class Term:
    key: str
    value: str
    equal: bool

    def matches(self, actual: str) -> bool:
        return (actual == self.value) == self.equal


def _split_terms(selector: str) -> list[str]:
    terms, current, escaped = [], "", False
    for char in selector:
        if escaped:
            current += "\\" + char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


def _unescape(value: str) -> str:
    out, escaped = "", False
    for char in value:
        if escaped:
            out += char
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out += char
    return out


def parse_fields(selector: str) -> list[Term]:
    """The terms of a field selector; a malformed term is a 400 as in kube."""
    terms = []
    for raw in _split_terms(selector):
        for operator, equal in (("!=", False), ("==", True), ("=", True)):
            index = _unescaped_index(raw, operator)
            if index >= 0:
                key, value = raw[:index].strip(), raw[index + len(operator) :]
                terms.append(Term(key, _unescape(value), equal))
                break
        else:
            raise statuses.bad_request(f"invalid selector: '{selector}'; can't understand '{raw}'")
    return terms


def _unescaped_index(text: str, operator: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(operator, i):
            return i
        i += 1
    return -1


def field_matcher(
    selector: str, labels: Mapping[str, str], value_of: Callable[[dict[str, object], str], str]
) -> Callable[[dict[str, object]], bool]:
    """A predicate on stored objects; `labels` maps this API's labels to stored labels."""
    terms = parse_fields(selector)
    for term in terms:
        if term.key not in labels:
            raise statuses.bad_request(f"field label not supported: {term.key}")

    def matches(stored: dict[str, object]) -> bool:
        return all(term.matches(value_of(stored, labels[term.key])) for term in terms)

    return matches


def label_matcher(selector: str) -> Callable[[dict[str, object]], bool]:
    clauses = [c.strip() for c in selector.split(",") if c.strip()]

    def matches(stored: dict[str, object]) -> bool:
        meta = stored.get("metadata")
        labels = (meta.get("labels") if isinstance(meta, dict) else None) or {}
        for clause in clauses:
            if "!=" in clause:
                key, value = (p.strip() for p in clause.split("!=", 1))
                if labels.get(key) == value:
                    return False
            elif "=" in clause:
                key, value = (p.strip() for p in clause.replace("==", "=").split("=", 1))
                if labels.get(key) != value:
                    return False
            elif clause.startswith("!"):
                if clause[1:] in labels:
                    return False
            elif clause not in labels:
                return False
        return True

    return matches
